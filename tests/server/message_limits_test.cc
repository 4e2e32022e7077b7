// gRPC message limits, end to end through the real coordinator and the channel every
// client and agent uses (proto/channel.h): a request past the coordinator's receive
// limit (--max-model-bytes + 1 MiB) is refused by gRPC with RESOURCE_EXHAUSTED, one
// past --max-model-bytes but under that by the validator, naming the flag; what is
// within both is served.

#include <catch2/catch.hpp>

#include "proto/channel.h"
#include "tests/server/job_fixtures.h"
#include "tests/server/job_server_harness.h"
#include "tests/support/temp_dir.h"

namespace cohort::server {
namespace {

using cohort::testing::TempDir;
using testing::ClassifierJson;
using testing::ClassifierSpec;
using testing::TestServer;
using testing::WriteData;

grpc::Status Submit(v1::JobService::Stub& stub, const v1::JobSpec& spec) {
  grpc::ClientContext ctx;
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  req.set_dry_run(true);
  v1::SubmitJobResponse resp;
  return stub.SubmitJob(&ctx, req, &resp);
}

TEST_CASE("Messages past the coordinator's limits are refused, naming the limit",
          "[server][limits]") {
  TempDir dir;
  TempDir data;
  WriteData(data.path(), 40, 64, 9);
  CoordinatorOptions options;
  options.artifacts.max_model_bytes = 1 << 20;  // receive limit: 2 MiB
  TestServer server(dir.path(), options);
  auto stub = v1::JobService::NewStub(
      CreateCoordinatorChannel(HostPort{"127.0.0.1", server.port()}));

  v1::JobSpec spec = ClassifierSpec(data.path());
  // JSON allows trailing blanks: the same model, padded.
  spec.set_config_json(ClassifierJson() + std::string((1 << 20) - ClassifierJson().size(), ' '));
  CHECK(Submit(*stub, spec).ok());

  spec.set_config_json(ClassifierJson() + std::string(3 << 19, ' '));  // 1.5 MiB
  grpc::Status validator = Submit(*stub, spec);
  CHECK(validator.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(validator.error_message(), Catch::Contains("more than --max-model-bytes (1048576)"));

  spec.set_config_json(std::string(3 << 20, ' '));  // 3 MiB: past the receive limit
  grpc::Status transport = Submit(*stub, spec);
  CHECK(transport.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(transport.error_message(), Catch::Contains("larger than max"));
}

}  // namespace
}  // namespace cohort::server
