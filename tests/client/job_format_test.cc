#include "client/job_format.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "client/exit_codes.h"
#include "proto/time_convert.h"

namespace cohort::client {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'100);

v1::Job RunningJob() {
  v1::Job job;
  job.set_id("job-7");
  job.mutable_spec()->set_name("digits");
  job.mutable_spec()->set_max_restarts(2);
  job.mutable_spec()->mutable_resources()->set_workers(2);
  job.set_state(v1::JOB_STATE_RUNNING);
  job.set_attempt(2);
  job.set_restarts(1);
  for (int r = 0; r < 2; ++r) {
    v1::Placement* p = job.add_placements();
    p->set_rank(r);
    p->set_worker(r == 0 ? "w1" : "w3");
  }
  ToProto(absl::FromUnixSeconds(1'700'000'000), job.mutable_created_at());
  v1::EpochEnd* e = job.mutable_last_epoch();
  e->set_epoch(3);
  e->set_epochs(10);
  ToProto(absl::Seconds(2), e->mutable_duration());
  v1::Metric* m = e->add_metrics();
  m->set_name("loss");
  m->set_value(0.5);
  v1::ArtifactInfo* a = job.add_artifacts();
  a->set_name("checkpoints/ckpt-epoch-000003.zip");
  a->set_size_bytes(150 * 1024);
  return job;
}

TEST_CASE("Job states: names, parsing, finality and exit codes", "[client]") {
  CHECK(JobStateName(v1::JOB_STATE_RESTARTING) == "RESTARTING");
  CHECK(JobStateFromName("running") == v1::JOB_STATE_RUNNING);
  CHECK(JobStateFromName("SUCCEEDED") == v1::JOB_STATE_SUCCEEDED);
  CHECK(JobStateFromName("JOB_STATE_FAILED") == v1::JOB_STATE_FAILED);
  CHECK_FALSE(JobStateFromName("unspecified").has_value());
  CHECK_FALSE(JobStateFromName("done").has_value());
  CHECK(IsFinal(v1::JOB_STATE_CANCELLED));
  CHECK_FALSE(IsFinal(v1::JOB_STATE_RESTARTING));
  CHECK(ExitCodeForState(v1::JOB_STATE_SUCCEEDED) == kExitOk);
  CHECK(ExitCodeForState(v1::JOB_STATE_FAILED) == kExitFailed);
  CHECK(ExitCodeForState(v1::JOB_STATE_CANCELLED) == kExitCancelled);
}

TEST_CASE("The status page lists what a person asks about a job", "[client]") {
  const std::string page = FormatJobStatus(RunningJob(), kNow);
  CHECK(page ==
        "job:        job-7 (digits)\n"
        "state:      RUNNING\n"
        "attempt:    2 (restarts: 1 of 2)\n"
        "resources:  2 ranks, cpu\n"
        "placements: rank 0 on w1 (slot 0), rank 1 on w3 (slot 0)\n"
        "created:    2023-11-14T22:13:20Z (1m40s ago)\n"
        "last epoch: 3/10 - 2s - loss: 0.5000\n"
        "artifacts:  checkpoints/ckpt-epoch-000003.zip (150 KiB)\n");

  v1::Job failed = RunningJob();
  failed.set_state(v1::JOB_STATE_FAILED);
  failed.set_reason("rank 1 on worker 'w3' exited with code 1: loss is NaN");
  CHECK(FormatJobStatus(failed, kNow).find(
            "reason:     rank 1 on worker 'w3' exited with code 1: loss is NaN\n") !=
        std::string::npos);
}

TEST_CASE("The job table has one row per job", "[client]") {
  v1::Job queued;
  queued.set_id("job-8");
  queued.mutable_spec()->set_name("mlp");
  queued.set_state(v1::JOB_STATE_QUEUED);
  CHECK(FormatJobTable({RunningJob(), queued}, kNow) ==
        "ID     NAME    STATE    RANKS  ATTEMPT  PROGRESS    CREATED\n"
        "job-7  digits  RUNNING  2      2        epoch 3/10  1m40s ago\n"
        "job-8  mlp     QUEUED   1      0\n");
}

TEST_CASE("Sizes read in binary units", "[client]") {
  CHECK(FormatBytes(512) == "512 B");
  CHECK(FormatBytes(1536) == "1.5 KiB");
  CHECK(FormatBytes(150 * 1024) == "150 KiB");
  CHECK(FormatBytes(3 * 1024 * 1024 + 400 * 1024) == "3.4 MiB");
}

TEST_CASE("A job as JSON uses proto field names and enum names", "[client]") {
  nlohmann::json j = nlohmann::json::parse(ToJsonLine(RunningJob()));
  CHECK(j["id"] == "job-7");
  CHECK(j["state"] == "JOB_STATE_RUNNING");
  CHECK(j["last_epoch"]["epoch"] == 3);
  CHECK(j["placements"][1]["worker"] == "w3");
}

}  // namespace
}  // namespace cohort::client
