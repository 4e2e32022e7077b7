// RankRunner and RankSet against the fake coordinator, with shell scripts standing in
// for `cohort-worker train` (they print the trainer's events and write its outputs).

#include "worker/agent/rank_runner.h"

#include <signal.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/transfer/sha256.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/worker/agent/fake_coordinator.h"
#include "worker/agent/rank_set.h"

namespace cohort::agent {
namespace {

std::string Hex(const std::string& bytes) {
  Sha256 sha;
  sha.Update(bytes);
  return sha.HexDigest();
}

// Parses --out and --resume, then runs `body` (sh) with $out set.
std::string FakeTrainer(const std::string& body) {
  return "#!/bin/sh\n"
         "out=''; resume=no; yaml=\"$2\"\n"
         "while [ $# -gt 0 ]; do case \"$1\" in --out) out=\"$2\"; shift;; "
         "--resume) resume=yes;; esac; shift; done\n" +
         body + "\n";
}

const char* kSucceeds = R"(
echo "$yaml" > "$out/../yaml-path"
echo '{"event":"start","rank":0,"world":1,"steps":5,"samples":100}'
echo "2026-12-03T08:07:34.123 W rank0: a warning" >&2
mkdir -p "$out/checkpoints"; echo ckpt > "$out/checkpoints/ckpt-epoch-000001.zip"
echo "{\"event\":\"checkpoint\",\"epoch\":1,\"path\":\"$out/checkpoints\",\"file\":\"$out/checkpoints/ckpt-epoch-000001.zip\"}"
echo '{"event":"epoch_end","epoch":1,"epochs":1,"metrics":{"loss":0.5},"seconds":1.5}'
echo model > "$out/model.keras"; echo '{"loss":[0.5]}' > "$out/history.json"
echo '{"event":"done"}'
exit 0)";

class Fixture {
 public:
  Fixture() {
    coordinator.With([&](auto& s) {
      s.data[model_.artifact_id()] = "model bytes";
      s.data[x_.artifact_id()] = "x bytes";
    });
    worker_stub_ = coordinator.WorkerStub();
    job_stub_ = coordinator.JobStub();
    cache_ = std::make_unique<DataCache>(dir.File("work/cache"), worker_stub_.get());
    events_ = std::make_unique<EventForwarder>(worker_stub_.get(), EventForwarder::Options{});
    context.worker = worker_stub_.get();
    context.jobs = job_stub_.get();
    context.cache = cache_.get();
    context.events = events_.get();
    context.work_dir = dir.File("work");
    context.launch.coordinator = HostPort{"127.0.0.1", static_cast<uint16_t>(coordinator.port())};
    context.stop_grace = absl::Milliseconds(500);
    context.rpc_timeout = absl::Seconds(2);
    context.shutdown = &shutdown_;
  }

  void UseTrainer(const std::string& body) {
    std::string path = dir.File("fake-trainer.sh");
    testing::WriteFile(path, FakeTrainer(body));
    chmod(path.c_str(), 0755);
    context.launch.trainer_binary = path;
  }

  v1::Assignment Start(int rank = 0, int world = 1) {
    v1::Assignment a;
    a.set_action(v1::ASSIGNMENT_ACTION_START);
    a.mutable_rank()->set_job_id("job-1");
    a.mutable_rank()->set_attempt(1);
    a.mutable_rank()->set_rank(rank);
    a.set_world_size(world);
    a.set_rendezvous_namespace("job-1/1");
    v1::JobSpec* spec = a.mutable_spec();
    spec->set_model_artifact_id(model_.artifact_id());
    spec->mutable_data()->mutable_x()->set_artifact_id(x_.artifact_id());
    spec->mutable_data()->mutable_y()->set_path("/shared/y.npy");
    spec->mutable_fit()->set_batch_size(32);
    spec->mutable_resources()->set_workers(world);
    *a.add_data_artifacts() = model_;
    *a.add_data_artifacts() = x_;
    return a;
  }

  std::vector<v1::ReportExitRequest> Exits() {
    return coordinator.With([](auto& s) { return s.exits; });
  }
  bool WaitForExits(size_t n) {
    return coordinator.WaitFor([n](const auto& s) { return s.exits.size() >= n; });
  }
  std::vector<v1::RankEvent> Events() {
    return coordinator.With([](auto& s) { return s.events; });
  }

  testing::FakeCoordinator coordinator;
  testing::TempDir dir;
  RunnerContext context;

 private:
  static v1::DataArtifact Artifact(const std::string& bytes, const std::string& ext) {
    v1::DataArtifact a;
    a.set_artifact_id(Hex(bytes) + ext);
    a.set_size_bytes(static_cast<int64_t>(bytes.size()));
    a.set_sha256(Hex(bytes));
    return a;
  }
  v1::DataArtifact model_ = Artifact("model bytes", ".keras");
  v1::DataArtifact x_ = Artifact("x bytes", ".npy");
  absl::Notification shutdown_;
  std::unique_ptr<v1::WorkerService::Stub> worker_stub_;
  std::unique_ptr<v1::JobService::Stub> job_stub_;
  std::unique_ptr<DataCache> cache_;
  std::unique_ptr<EventForwarder> events_;
};

TEST_CASE("rank 0 runs, forwards its events, uploads its outputs, then reports exit 0",
          "[agent][runner]") {
  Fixture f;
  f.UseTrainer(kSucceeds);
  RankRunner runner(f.context, f.Start());
  REQUIRE(runner.WaitDone(absl::Seconds(20)));
  CHECK_FALSE(runner.Active());
  std::vector<v1::ReportExitRequest> exits = f.Exits();
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].rank().job_id() == "job-1");
  CHECK(exits[0].exit_code() == 0);
  CHECK(exits[0].signal() == 0);
  // Every upload came before the exit report.
  CHECK(f.coordinator.With([](auto& s) { return s.uploads_at_exit.at(0); }) == 3);
  auto uploads = f.coordinator.With([](auto& s) { return s.uploads; });
  CHECK(uploads["model.keras"] == "model\n");
  CHECK(uploads["history.json"] == "{\"loss\":[0.5]}\n");
  CHECK(uploads["checkpoints/ckpt-epoch-000001.zip"] == "ckpt\n");

  REQUIRE(f.coordinator.WaitFor([](const auto& s) { return s.events.size() >= 3; }));
  std::vector<v1::RankEvent> events = f.Events();
  bool started = false, warned = false, epoch = false;
  for (const v1::RankEvent& e : events) {
    CHECK(e.rank().job_id() == "job-1");
    if (e.has_started()) started = e.started().steps_per_epoch() == 5;
    if (e.has_log()) warned = e.log().level() == v1::LOG_LEVEL_WARNING && e.log().text() == "a warning";
    if (e.has_epoch()) epoch = e.epoch().metrics(0).name() == "loss";
  }
  CHECK(started);
  CHECK(warned);
  CHECK(epoch);

  // The trainer read the attempt's job.yaml, which names the cached files.
  std::string yaml_path = f.dir.File("work/jobs/job-1/attempt-1/job.yaml");
  CHECK(testing::ReadFile(f.dir.File("work/jobs/job-1/yaml-path")) == yaml_path + "\n");
  std::string yaml = testing::ReadFile(yaml_path);
  CHECK(yaml.find(f.dir.File("work/cache/")) != std::string::npos);
}

TEST_CASE("a failing trainer's error event is the exit message", "[agent][runner]") {
  Fixture f;
  f.UseTrainer(R"(
echo "2026-12-03T08:07:34.123 E rank1: epoch 1 went wrong" >&2
echo '{"event":"error","message":"loss is NaN"}'
exit 1)");
  RankRunner runner(f.context, f.Start(1, 2));
  REQUIRE(runner.WaitDone(absl::Seconds(20)));
  std::vector<v1::ReportExitRequest> exits = f.Exits();
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].exit_code() == 1);
  CHECK(exits[0].message() == "loss is NaN");
  CHECK(f.coordinator.With([](auto& s) { return s.uploads.size(); }) == 0);
}

TEST_CASE("without an error event the last stderr line is the message", "[agent][runner]") {
  Fixture f;
  f.UseTrainer(R"(
echo "first" >&2
echo "cohort-worker train: error: job.yaml: fit.epochs: bad" >&2
exit 2)");
  RankRunner runner(f.context, f.Start());
  REQUIRE(runner.WaitDone(absl::Seconds(20)));
  REQUIRE(f.Exits().size() == 1);
  CHECK(f.Exits()[0].exit_code() == 2);
  CHECK(f.Exits()[0].message() == "cohort-worker train: error: job.yaml: fit.epochs: bad");
}

TEST_CASE("rank 0 that exits 0 without a model reports the failed upload", "[agent][runner]") {
  Fixture f;
  f.UseTrainer("exit 0");
  RankRunner runner(f.context, f.Start());
  REQUIRE(runner.WaitDone(absl::Seconds(20)));
  REQUIRE(f.Exits().size() == 1);
  CHECK(f.Exits()[0].exit_code() == 1);
  CHECK(f.Exits()[0].message().find("model.keras") != std::string::npos);
}

TEST_CASE("Stop escalates to SIGKILL and the exit is reported", "[agent][runner]") {
  Fixture f;
  f.UseTrainer(R"(
trap '' TERM
echo '{"event":"start","steps":5,"samples":100}'
while true; do sleep 0.05; done)");
  RankRunner runner(f.context, f.Start());
  REQUIRE(f.coordinator.WaitFor([](const auto& s) {
    for (const auto& e : s.events) {
      if (e.has_started()) return true;
    }
    return false;
  }));
  CHECK(runner.Active());
  runner.Stop();
  REQUIRE(runner.WaitDone(absl::Seconds(10)));
  REQUIRE(f.Exits().size() == 1);
  CHECK(f.Exits()[0].exit_code() == -1);
  CHECK(f.Exits()[0].signal() == SIGKILL);
}

TEST_CASE("a rank whose data fails its check never starts and reports why", "[agent][runner]") {
  Fixture f;
  f.UseTrainer("touch \"$out/../ran\"; exit 0");
  v1::Assignment a = f.Start();
  a.mutable_data_artifacts(1)->set_sha256(std::string(64, 'f'));
  RankRunner runner(f.context, a);
  REQUIRE(runner.WaitDone(absl::Seconds(20)));
  REQUIRE(f.Exits().size() == 1);
  CHECK(f.Exits()[0].exit_code() == 1);
  CHECK(f.Exits()[0].message().find(a.data_artifacts(1).artifact_id()) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(f.dir.File("work/jobs/job-1/ran")));
  CHECK_FALSE(std::filesystem::exists(f.dir.File("work/cache/" + a.data_artifacts(1).artifact_id())));
}

TEST_CASE("a bad assignment is reported as the rank's exit", "[agent][runner]") {
  Fixture f;
  f.UseTrainer("exit 0");
  v1::Assignment a = f.Start();
  a.mutable_rank()->set_job_id("../x");
  RankRunner runner(f.context, a);
  REQUIRE(runner.WaitDone(absl::Seconds(20)));
  REQUIRE(f.Exits().size() == 1);
  CHECK(f.Exits()[0].exit_code() == 1);
  CHECK(f.Exits()[0].message().find("job_id") != std::string::npos);
}

TEST_CASE("ReportExit is retried until the coordinator takes it", "[agent][runner]") {
  Fixture f;
  f.UseTrainer("echo boom >&2; exit 3");
  f.coordinator.With([](auto& s) { s.report_exit_failures = 3; });
  RankRunner runner(f.context, f.Start(1, 2));
  REQUIRE(runner.WaitDone(absl::Seconds(20)));
  REQUIRE(f.Exits().size() == 1);
  CHECK(f.Exits()[0].exit_code() == 3);
  CHECK(f.Exits()[0].message() == "boom");
}

TEST_CASE("rank 0 uploads only its own checkpoint files, whatever a stdout line names",
          "[agent][runner][paths]") {
  Fixture f;
  const std::string secret = f.dir.File("secret.zip");
  testing::WriteFile(secret, "not yours\n");
  f.UseTrainer(std::string(R"(
mkdir -p "$out/checkpoints" "$out/tensorboard"
ln -s ")") + secret + R"(" "$out/checkpoints/link.zip"
ln -s ")" + secret + R"(" "$out/tensorboard/events.out.tfevents.1"
echo "{\"event\":\"checkpoint\",\"epoch\":1,\"file\":\")" + secret + R"(\"}"
echo "{\"event\":\"checkpoint\",\"epoch\":1,\"file\":\"$out/checkpoints/../../../secret.zip\"}"
echo "{\"event\":\"checkpoint\",\"epoch\":1,\"file\":\"$out/checkpoints/link.zip\"}"
echo ckpt > "$out/checkpoints/ckpt-epoch-000001.zip"
echo "{\"event\":\"checkpoint\",\"epoch\":1,\"file\":\"$out/checkpoints/ckpt-epoch-000001.zip\"}"
echo '{"event":"epoch_end","epoch":1,"epochs":1,"metrics":{"loss":0.5},"seconds":1.5}'
echo model > "$out/model.keras"; echo '{"loss":[0.5]}' > "$out/history.json"
exit 0)");
  RankRunner runner(f.context, f.Start());
  REQUIRE(runner.WaitDone(absl::Seconds(20)));
  auto uploads = f.coordinator.With([](auto& s) { return s.uploads; });
  CHECK(uploads["checkpoints/ckpt-epoch-000001.zip"] == "ckpt\n");
  for (const auto& [name, bytes] : uploads) {
    INFO(name);
    CHECK(bytes != "not yours\n");
  }
  CHECK(uploads.count("checkpoints/secret.zip") == 0);
  CHECK(uploads.count("checkpoints/link.zip") == 0);
  CHECK(uploads.count("tensorboard/events.out.tfevents.1") == 0);
  // Each refused checkpoint is a warning among the job's events, for its owner to see.
  auto refused = [](const std::vector<v1::RankEvent>& events) {
    int n = 0;
    for (const v1::RankEvent& e : events) {
      n += e.has_log() && e.log().level() == v1::LOG_LEVEL_WARNING &&
           absl::StartsWith(e.log().text(), "not uploading checkpoints/");
    }
    return n;
  };
  CHECK(f.coordinator.WaitFor([&](const auto& s) { return refused(s.events) == 3; }));
}

TEST_CASE("rank 0 of a resumed attempt downloads the checkpoint and passes --resume",
          "[agent][runner]") {
  Fixture f;
  f.UseTrainer(R"(
ls "$out/checkpoints" > "$out/../seen"; echo "$resume" >> "$out/../seen"; exit 1)");
  f.coordinator.With([](auto& s) {
    s.job_artifacts["job-1/checkpoints/ckpt-epoch-000004.zip"] = "checkpoint bytes";
  });
  v1::Assignment a = f.Start();
  a.mutable_rank()->set_attempt(2);
  a.set_rendezvous_namespace("job-1/2");
  a.set_resume(true);
  a.set_checkpoint_artifact("checkpoints/ckpt-epoch-000004.zip");
  RankRunner runner(f.context, a);
  REQUIRE(runner.WaitDone(absl::Seconds(20)));
  CHECK(testing::ReadFile(f.dir.File("work/jobs/job-1/seen")) == "ckpt-epoch-000004.zip\nyes\n");
  CHECK(testing::ReadFile(f.dir.File("work/jobs/job-1/rank-0/checkpoints/ckpt-epoch-000004.zip")) ==
        "checkpoint bytes");
}

TEST_CASE("RankSet: Running lists live ranks, STOP stops an attempt's ranks only",
          "[agent][runner]") {
  Fixture f;
  f.UseTrainer(R"(
echo '{"event":"start","steps":5,"samples":100}'
exec sleep 30)");
  RankSet ranks(f.context);
  v1::Assignment a0 = f.Start(0, 2), a1 = f.Start(1, 2);
  v1::Assignment other = f.Start(0, 1);
  other.mutable_rank()->set_job_id("job-2");
  other.set_rendezvous_namespace("job-2/1");
  REQUIRE(ranks.Start(a0));
  REQUIRE(ranks.Start(a1));
  REQUIRE(ranks.Start(other));
  CHECK_FALSE(ranks.Start(a1));  // a duplicate START
  CHECK(ranks.Running().size() == 3);
  REQUIRE(f.coordinator.WaitFor([](const auto& s) {
    int started = 0;
    for (const auto& e : s.events) started += e.has_started();
    return started == 3;
  }));
  CHECK(ranks.StopAttempt("job-1", 1) == 2);
  REQUIRE(f.WaitForExits(2));
  CHECK(testing::WaitUntil([&] { return ranks.Running().size() == 1; }, absl::Seconds(10)));
  CHECK(ranks.Running().at(0).job_id() == "job-2");
  for (const auto& exit : f.Exits()) {
    CHECK(exit.rank().job_id() == "job-1");
    CHECK(exit.signal() == SIGTERM);
  }
  ranks.StopAll();
  CHECK(ranks.WaitAllDone(absl::Seconds(10)));
  CHECK(f.Exits().size() == 3);
  CHECK_FALSE(ranks.Start(f.Start(0, 1)));  // shutting down: no new ranks
}

}  // namespace
}  // namespace cohort::agent
