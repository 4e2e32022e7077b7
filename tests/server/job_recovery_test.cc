// A coordinator restart on the same SQLite file: every job is found; running ones are
// requeued (not counted as restarts) and resume; old trainers are stopped (rule 3/10).

#include <catch2/catch.hpp>

#include "tests/server/job_fixtures.h"
#include "tests/server/job_server_harness.h"
#include "tests/support/temp_dir.h"

namespace cohort::server {
namespace {

using cohort::testing::TempDir;
using testing::ClassifierSpec;
using testing::Expect;
using testing::FakeAgent;
using testing::Rank;
using testing::TestServer;
using testing::WriteData;

TEST_CASE("After a coordinator restart running jobs resume and queued ones stay queued",
          "[server][jobs][recovery]") {
  TempDir data, dir;
  WriteData(data.path(), 40, 64, 9);
  TestServer server(dir.path());
  FakeAgent w1("w1", 1);
  w1.Join(server);
  const std::string running = server.Submit(ClassifierSpec(data.path(), 1)).id();
  Expect(w1, v1::ASSIGNMENT_ACTION_START);
  REQUIRE(w1.Started(Rank(running, 1, 0)).ok());
  REQUIRE(server.WaitForState(running, v1::JOB_STATE_RUNNING));
  REQUIRE(w1.Upload(Rank(running, 1, 0), "checkpoints/ckpt-epoch-000001.zip", "c1").ok());
  const std::string queued = server.Submit(ClassifierSpec(data.path(), 1)).id();

  w1.StopHeartbeats();
  w1.CloseStream();
  server.Restart();

  v1::Job requeued = server.Get(running);
  CHECK(requeued.state() == v1::JOB_STATE_QUEUED);
  CHECK(requeued.restarts() == 0);
  CHECK(requeued.attempt() == 1);
  CHECK(requeued.reason() == "requeued after a coordinator restart (attempt 1 ended)");
  CHECK(server.Get(queued).state() == v1::JOB_STATE_QUEUED);

  // The agent comes back with its old trainer still running: it is told to stop it, and
  // its slot stays busy until the exit is reported.
  w1.Join(server, {Rank(running, 1, 0)});
  v1::Assignment stop = Expect(w1, v1::ASSIGNMENT_ACTION_STOP);
  CHECK(stop.rank().job_id() == running);
  CHECK(stop.rank().attempt() == 1);
  std::optional<v1::Assignment> early = w1.Next(absl::Milliseconds(1500));
  while (early && early->action() == v1::ASSIGNMENT_ACTION_STOP) {
    early = w1.Next(absl::Milliseconds(500));  // repeated STOPs are fine
  }
  CHECK_FALSE(early.has_value());
  w1.StopHeartbeats();
  w1.CloseStream();
  w1.Join(server);  // the old trainer is gone now
  REQUIRE(w1.Exit(Rank(running, 1, 0), -1, "", 15).ok());

  v1::Assignment start = Expect(w1, v1::ASSIGNMENT_ACTION_START);
  CHECK(start.rank().job_id() == running);
  CHECK(start.rank().attempt() == 2);
  CHECK(start.resume());
  CHECK(start.checkpoint_artifact() == "checkpoints/ckpt-epoch-000001.zip");
  CHECK(server.Get(queued).state() == v1::JOB_STATE_QUEUED);

  // Finish it; the queued job follows.
  REQUIRE(w1.Started(Rank(running, 2, 0)).ok());
  REQUIRE(w1.Upload(Rank(running, 2, 0), "model.keras", "m").ok());
  REQUIRE(w1.Exit(Rank(running, 2, 0), 0).ok());
  REQUIRE(server.WaitForState(running, v1::JOB_STATE_SUCCEEDED));
  v1::Assignment next = Expect(w1, v1::ASSIGNMENT_ACTION_START);
  CHECK(next.rank().job_id() == queued);
  CHECK_FALSE(next.resume());
}

}  // namespace
}  // namespace cohort::server
