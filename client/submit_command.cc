#include "client/submit_command.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/exit_codes.h"
#include "client/upload.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "common/job/job_spec_yaml.h"
#include "proto/channel.h"
#include "proto/grpc_status.h"
#include "proto/job_spec_convert.h"

namespace cohort::client {
namespace {

constexpr int kSubmitTries = 3;
constexpr absl::Duration kSubmitTimeout = absl::Minutes(2);

int Refused(const std::string& message) {
  std::fprintf(stderr, "cohort: error: %s\n", message.c_str());
  return kExitUsage;
}

}  // namespace

std::string RandomIdempotencyKey() {
  std::random_device random;
  std::string key;
  for (int i = 0; i < 4; ++i) absl::StrAppendFormat(&key, "%08x", random());
  return key;
}

absl::StatusOr<std::string> ResolvedSpecYaml(const v1::JobSpec& spec) {
  absl::StatusOr<job::JobSpec> typed = proto::JobSpecFromProto(
      spec, [](const std::string& id) -> absl::StatusOr<std::string> {
        return "artifact:" + id;
      });
  if (!typed.ok()) return typed.status();
  return job::JobSpecToYaml(*typed);
}

int RunSubmitCommand(const Connection& connection, const SubmitOptions& options,
                     InterruptWatcher* interrupt) {
  absl::StatusOr<job::JobSpec> spec = ResolveSubmitSpec(options.flags, options.cwd);
  if (!spec.ok()) return Refused(std::string(spec.status().message()));

  auto stub = NewJobStub(connection);
  v1::SubmitJobRequest request;
  *request.mutable_spec() = proto::JobSpecToProto(*spec);
  request.set_dry_run(options.dry_run);
  request.set_idempotency_key(options.idempotency_key.empty() ? RandomIdempotencyKey()
                                                              : options.idempotency_key);
  const bool quiet = options.output == "json";
  if (options.upload) {
    absl::Status uploaded = UploadSpecFiles(
        *stub, *request.mutable_spec(), [&](const std::string& path, const std::string& id) {
          if (!quiet) std::fprintf(stderr, "cohort: uploaded %s as %s\n", path.c_str(), id.c_str());
        });
    if (!uploaded.ok()) {
      if (uploaded.code() == absl::StatusCode::kInvalidArgument ||
          uploaded.code() == absl::StatusCode::kNotFound) {  // a missing local file
        return Refused(std::string(uploaded.message()));
      }
      return ReportCallError(connection, ToGrpcStatus(uploaded));
    }
  }

  v1::SubmitJobResponse response;
  grpc::Status status;
  // The coordinator reads the data to check it before answering: give it time. An
  // unreachable coordinator still fails at once (UNAVAILABLE).
  Connection submit_connection = connection;
  submit_connection.timeout = std::max(connection.timeout, kSubmitTimeout);
  for (int attempt = 1; attempt <= kSubmitTries; ++attempt) {
    status = stub->SubmitJob(NewCallContext(submit_connection).get(), request, &response);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE || attempt == kSubmitTries) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500 * attempt));
  }
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    return Refused(status.error_message());
  }
  if (!status.ok()) return ReportCallError(connection, status);

  if (options.dry_run) {
    absl::StatusOr<std::string> yaml = ResolvedSpecYaml(response.job().spec());
    if (!yaml.ok()) {
      std::fprintf(stderr, "cohort: error: the coordinator's resolved spec: %s\n",
                   std::string(yaml.status().message()).c_str());
      return kExitFailed;
    }
    std::fputs(yaml->c_str(), stdout);
    return kExitOk;
  }
  const std::string& id = response.job().id();
  if (!options.follow) {
    std::printf("%s\n", id.c_str());
    return kExitOk;
  }
  if (!quiet) std::fprintf(stderr, "cohort: submitted %s\n", id.c_str());
  WatchOptions watch;
  watch.job_id = id;
  watch.style = StyleFromFlag(options.output, &watch.color);
  watch.columns = TerminalColumns();
  return WatchJob(connection, watch, *interrupt);
}

}  // namespace cohort::client
