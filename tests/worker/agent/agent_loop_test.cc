// The Agent against the fake coordinator, with a shell script as its trainer binary:
// the lease protocol (register, one heartbeat, then the stream), START and STOP from
// the stream, Heartbeat.running, and shutdown (ranks stopped, exits reported).

#include "worker/agent/agent.h"

#include <signal.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <thread>

#include "absl/time/clock.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/worker/agent/fake_coordinator.h"

namespace cohort::agent {
namespace {

v1::Assignment StartOf(const std::string& job, int rank, int world) {
  v1::Assignment a;
  a.set_action(v1::ASSIGNMENT_ACTION_START);
  a.mutable_rank()->set_job_id(job);
  a.mutable_rank()->set_attempt(1);
  a.mutable_rank()->set_rank(rank);
  a.set_world_size(world);
  a.set_slot(rank);
  a.set_rendezvous_namespace(job + "/1");
  v1::JobSpec* spec = a.mutable_spec();
  spec->set_keras_path("/shared/model.keras");
  spec->mutable_data()->mutable_x()->set_path("/shared/x.npy");
  spec->mutable_data()->mutable_y()->set_path("/shared/y.npy");
  spec->mutable_fit()->set_batch_size(32);
  spec->mutable_resources()->set_workers(world);
  return a;
}

TEST_CASE("Agent: lease, assignments, running ranks and a clean shutdown", "[agent][loop]") {
  testing::FakeCoordinator coordinator;
  testing::TempDir dir;
  std::string trainer = dir.File("trainer.sh");
  testing::WriteFile(trainer,
                     "#!/bin/sh\n"
                     "echo '{\"event\":\"start\",\"steps\":5,\"samples\":100}'\n"
                     "exec sleep 60\n");
  chmod(trainer.c_str(), 0755);

  AgentOptions options;
  options.coordinator = HostPort{"127.0.0.1", static_cast<uint16_t>(coordinator.port())};
  options.name = "w1";
  options.cpu_slots = 2;
  options.advertise_address = "127.0.0.1";
  options.work_dir = dir.File("work");
  options.stop_grace = absl::Seconds(1);
  options.trainer_binary = trainer;
  Agent agent(options);
  absl::Status result;
  std::thread run([&] { result = agent.Run(); });

  // Register, then one heartbeat, then the stream.
  REQUIRE(coordinator.WaitFor([](const auto& s) { return s.streams_opened == 1; }));
  CHECK(coordinator.With([](auto& s) { return s.registers; }) == 1);
  CHECK(coordinator.With([](auto& s) { return s.heartbeats.size(); }) >= 1);

  coordinator.With([](auto& s) {
    s.to_send.push_back(StartOf("job-a", 0, 2));
    s.to_send.push_back(StartOf("job-a", 1, 2));
  });
  // Both ranks start and show up in Heartbeat.running.
  REQUIRE(coordinator.WaitFor([](const auto& s) {
    return !s.heartbeats.empty() && s.heartbeats.back().running_size() == 2;
  }));
  REQUIRE(coordinator.WaitFor([](const auto& s) {
    int started = 0;
    for (const auto& e : s.events) started += e.has_started();
    return started == 2;
  }));

  // STOP for the attempt: both ranks end with SIGTERM and report it.
  v1::Assignment stop;
  stop.set_action(v1::ASSIGNMENT_ACTION_STOP);
  stop.mutable_rank()->set_job_id("job-a");
  stop.mutable_rank()->set_attempt(1);
  coordinator.With([&](auto& s) { s.to_send.push_back(stop); });
  REQUIRE(coordinator.WaitFor([](const auto& s) { return s.exits.size() == 2; }));
  for (const auto& exit : coordinator.With([](auto& s) { return s.exits; })) {
    CHECK(exit.exit_code() == -1);
    CHECK(exit.signal() == SIGTERM);
  }
  REQUIRE(coordinator.WaitFor([](const auto& s) {
    return !s.heartbeats.empty() && s.heartbeats.back().running_size() == 0;
  }));

  // A rank still running when the agent stops is stopped and reported.
  coordinator.With([](auto& s) { s.to_send.push_back(StartOf("job-b", 0, 1)); });
  REQUIRE(coordinator.WaitFor([](const auto& s) {
    return !s.heartbeats.empty() && s.heartbeats.back().running_size() == 1;
  }));
  absl::Time stopping = absl::Now();
  agent.Stop();
  run.join();
  CHECK(result.ok());
  CHECK(absl::Now() - stopping < absl::Seconds(10));
  auto exits = coordinator.With([](auto& s) { return s.exits; });
  REQUIRE(exits.size() == 3);
  CHECK(exits[2].rank().job_id() == "job-b");
}

TEST_CASE("Agent: a forgotten lease is registered again and the stream re-opened",
          "[agent][loop]") {
  testing::FakeCoordinator coordinator;
  testing::TempDir dir;
  AgentOptions options;
  options.coordinator = HostPort{"127.0.0.1", static_cast<uint16_t>(coordinator.port())};
  options.name = "w1";
  options.work_dir = dir.File("work");
  options.max_backoff = absl::Milliseconds(200);
  Agent agent(options);
  std::thread run([&] { agent.Run().IgnoreError(); });
  REQUIRE(coordinator.WaitFor([](const auto& s) { return s.streams_opened == 1; }));
  // The coordinator restarted: it no longer knows lease-1.
  coordinator.With([](auto& s) { s.forgotten_leases.insert("lease-1"); });
  REQUIRE(coordinator.WaitFor(
      [](const auto& s) { return s.registers == 2 && s.streams_opened >= 2; }));
  // The new lease is renewed, and assignments flow on the new stream.
  size_t heartbeats = coordinator.With([](auto& s) { return s.heartbeats.size(); });
  REQUIRE(coordinator.WaitFor([&](const auto& s) { return s.heartbeats.size() > heartbeats + 1; }));
  CHECK(coordinator.With([](auto& s) { return s.heartbeats.back().lease_id(); }) == "lease-2");
  agent.Stop();
  run.join();
}

TEST_CASE("Agent: bad work dir is an error, not a hang", "[agent][loop]") {
  testing::TempDir dir;
  testing::WriteFile(dir.File("file"), "x");
  AgentOptions options;
  options.coordinator = HostPort{"127.0.0.1", 1};
  options.name = "w1";
  options.work_dir = dir.File("file/work");
  Agent agent(options);
  absl::Status status = agent.Run();
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(status.message().find("--work-dir") != std::string::npos);
}

}  // namespace
}  // namespace cohort::agent
