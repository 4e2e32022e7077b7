#include "tests/integration/job_client.h"

#include <algorithm>

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/job/job_spec_yaml.h"
#include "proto/channel.h"
#include "proto/job_spec_convert.h"
#include "tests/support/process.h"

namespace cohort::testing {
namespace {

std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout = absl::Seconds(10)) {
  return ContextWithDeadline(timeout);
}

}  // namespace

std::string DigitsJobYaml(const DigitsJob& job, const std::string& data_dir) {
  return absl::StrCat("name: ", job.name, "\n",
                      "model: ", COHORT_SOURCE_DIR, "/examples/digits_cnn.keras\n",
                      "data:\n",
                      "  x: ", data_dir, "/x_train.npy\n",
                      "  y: ", data_dir, "/y_train.npy\n",
                      "  validation_x: ", data_dir, "/x_test.npy\n",
                      "  validation_y: ", data_dir, "/y_test.npy\n",
                      "fit:\n",
                      "  epochs: ", job.epochs, "\n",
                      "  batch_size: ", job.batch_size, "\n",
                      "  seed: 1\n",
                      "resources:\n",
                      "  workers: ", job.workers, "\n",
                      "checkpoint:\n",
                      "  every_epochs: ", job.every_epochs, "\n",
                      "priority: ", job.priority, "\n",
                      "max_restarts: ", job.max_restarts, "\n");
}

DigitsData::DigitsData() {
  CommandResult r = RunCommand(
      {COHORT_VENV_PYTHON, std::string(COHORT_SOURCE_DIR) + "/examples/make_digits.py", dir_.path()},
      absl::Seconds(180));
  INFO(r.output);
  REQUIRE(r.status.code == 0);
}

std::string DigitsData::Write(const DigitsJob& job) const {
  std::string path = dir_.File(job.name + ".yaml");
  WriteFile(path, DigitsJobYaml(job, dir_.path()));
  return path;
}

JobClient::JobClient(const std::string& address, const ChannelSecurity& security) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  REQUIRE(hp.ok());
  stub_ = v1::JobService::NewStub(CreateCoordinatorChannel(*hp, security));
}

std::string JobClient::Submit(const std::string& yaml_path) {
  absl::StatusOr<job::JobSpec> spec = job::LoadJobSpec(yaml_path);
  INFO(spec.status().ToString());
  REQUIRE(spec.ok());
  v1::SubmitJobRequest request;
  *request.mutable_spec() = proto::JobSpecToProto(*spec);
  v1::SubmitJobResponse response;
  grpc::Status status = stub_->SubmitJob(Context().get(), request, &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  REQUIRE(!response.job().id().empty());
  return response.job().id();
}

v1::Job JobClient::Get(const std::string& id) {
  v1::GetJobRequest request;
  request.set_job_id(id);
  v1::Job job;
  grpc::Status status = stub_->GetJob(Context().get(), request, &job);
  INFO(status.error_message());
  REQUIRE(status.ok());
  return job;
}

bool JobClient::WaitFor(const std::string& id, const std::function<bool(const v1::Job&)>& done,
                        absl::Duration timeout) {
  return WaitUntil([&] { return done(Get(id)); }, timeout);
}

v1::Job JobClient::WaitForState(const std::string& id, v1::JobState state,
                                absl::Duration timeout) {
  v1::Job job;
  bool reached = WaitUntil(
      [&] {
        job = Get(id);
        return job.state() == state;
      },
      timeout);
  INFO("job " << id << " is " << StateName(job.state()) << " (wanted " << StateName(state)
              << "), attempt " << job.attempt() << ", reason: " << job.reason());
  REQUIRE(reached);
  return job;
}

std::vector<v1::JobEvent> JobClient::Events(const std::string& id, absl::Duration timeout) {
  v1::WatchJobRequest request;
  request.set_job_id(id);
  auto context = Context(timeout);
  auto reader = stub_->WatchJob(context.get(), request);
  std::vector<v1::JobEvent> events;
  v1::JobEvent event;
  while (reader->Read(&event)) events.push_back(event);
  grpc::Status status = reader->Finish();
  INFO(status.error_message());
  REQUIRE(status.ok());
  return events;
}

grpc::Status JobClient::Cancel(const std::string& id, v1::Job* job) {
  v1::CancelJobRequest request;
  request.set_job_id(id);
  request.set_reason("cancelled by the test");
  v1::Job ignored;
  return stub_->CancelJob(Context().get(), request, job ? job : &ignored);
}

std::string StateName(v1::JobState state) { return v1::JobState_Name(state); }

std::string WorkerOfRank(const v1::Job& job, int rank) {
  for (const v1::Placement& p : job.placements()) {
    if (p.rank() == rank) return p.worker();
  }
  return "";
}

bool HasArtifact(const v1::Job& job, absl::string_view prefix) {
  return std::any_of(job.artifacts().begin(), job.artifacts().end(),
                     [&](const v1::ArtifactInfo& a) { return absl::StartsWith(a.name(), prefix); });
}

void CheckNothingLost(const std::vector<v1::JobEvent>& events, v1::JobState final_state) {
  REQUIRE(!events.empty());
  for (size_t i = 0; i < events.size(); ++i) {
    INFO("event " << i);
    REQUIRE(events[i].sequence() == static_cast<int64_t>(i) + 1);
  }
  REQUIRE(events.back().has_state_change());
  CHECK(events.back().state_change().to() == final_state);
}

std::set<int> EndedEpochs(const std::vector<v1::JobEvent>& events, int attempt) {
  std::set<int> epochs;
  for (const v1::JobEvent& e : events) {
    if (e.has_epoch() && (attempt == 0 || e.attempt() == attempt)) epochs.insert(e.epoch().epoch());
  }
  return epochs;
}

}  // namespace cohort::testing
