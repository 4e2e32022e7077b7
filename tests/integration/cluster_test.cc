// The cluster forms: agents register with a real coordinator, keep their leases, are
// reported lost when killed, and come back after the coordinator restarts.

#include <signal.h>

#include <algorithm>
#include <thread>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "tests/integration/cluster.h"

namespace cohort::testing {
namespace {

TEST_CASE("Two workers register and are listed with their slots", "[integration]") {
  Cluster cluster;
  REQUIRE(cluster.StartServer());
  cluster.StartWorker("w1", 1);
  cluster.StartWorker("w2", 3);
  REQUIRE(cluster.WaitForWorkerState("w1", "alive"));
  REQUIRE(cluster.WaitForWorkerState("w2", "alive"));
  auto workers = cluster.Workers();
  REQUIRE(workers.size() == 2);
  CHECK(workers["w1"]["cpu_slots"] == 1);
  CHECK(workers["w2"]["cpu_slots"] == 3);
  CHECK(workers["w1"]["address"] == "127.0.0.1");
  CHECK(workers["w1"]["gpus"].empty());
  CHECK_FALSE(workers["w1"]["last_seen"].get<std::string>().empty());

  CommandResult table = cluster.Cli({"workers"});
  REQUIRE(table.status.code == 0);
  CHECK(table.out.find("NAME") != std::string::npos);
  CHECK(table.out.find("w2    alive  3") != std::string::npos);
}

TEST_CASE("A worker killed with SIGKILL is reported lost after its lease", "[integration]") {
  Cluster cluster("1s");
  REQUIRE(cluster.StartServer());
  cluster.StartWorker("w1");
  cluster.StartWorker("w2");
  REQUIRE(cluster.WaitForWorkerState("w1", "alive"));
  REQUIRE(cluster.WaitForWorkerState("w2", "alive"));

  cluster.worker("w2").Signal(SIGKILL);
  REQUIRE(cluster.worker("w2").Wait(absl::Seconds(5)).has_value());
  absl::Time killed = absl::Now();
  REQUIRE(cluster.WaitForWorkerState("w2", "lost", absl::Seconds(10)));
  // Not before the 1 s lease could have run out.
  CHECK(absl::Now() - killed >= absl::Milliseconds(500));
  // The other worker keeps its lease all the while.
  CHECK(cluster.Workers()["w1"]["state"] == "alive");
  CHECK(cluster.server().Output().find("worker w2 lost") != std::string::npos);
}

TEST_CASE("A restarted coordinator sees the workers come back", "[integration]") {
  Cluster cluster("2s");
  REQUIRE(cluster.StartServer());
  cluster.StartWorker("w1");
  cluster.StartWorker("w2");
  REQUIRE(cluster.WaitForWorkerState("w1", "alive"));
  REQUIRE(cluster.WaitForWorkerState("w2", "alive"));

  ExitStatus stopped = cluster.StopServer();
  CHECK(stopped.code == 0);
  REQUIRE(cluster.StartServer());
  // The restarted coordinator remembers both workers (from its database) and the agents
  // register again under their names.
  CHECK(cluster.Workers().size() == 2);
  REQUIRE(cluster.WaitForWorkerState("w1", "alive"));
  REQUIRE(cluster.WaitForWorkerState("w2", "alive"));
  CHECK(cluster.worker("w1").Output().find("registering again") != std::string::npos);
  CHECK(cluster.worker("w1").Running());
}

TEST_CASE("A worker stopped with SIGTERM deregisters and exits cleanly", "[integration]") {
  Cluster cluster;
  REQUIRE(cluster.StartServer());
  Process& w = cluster.StartWorker("w1");
  REQUIRE(cluster.WaitForWorkerState("w1", "alive"));
  w.Signal(SIGTERM);
  auto status = w.Wait(absl::Seconds(10));
  REQUIRE(status.has_value());
  CHECK(status->code == 0);
  CHECK(cluster.Workers()["w1"]["state"] == "left");
}

TEST_CASE("An agent keeps retrying until the coordinator appears", "[integration]") {
  Cluster cluster;
  Process& w = cluster.StartWorker("early");
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  CHECK(w.Running());
  REQUIRE(cluster.StartServer());
  REQUIRE(cluster.WaitForWorkerState("early", "alive"));
}

TEST_CASE("A second agent with a live worker's name is held off", "[integration]") {
  Cluster cluster("2s");
  REQUIRE(cluster.StartServer());
  cluster.StartWorker("w1");
  REQUIRE(cluster.WaitForWorkerState("w1", "alive"));
  Process impostor({COHORT_WORKER_BIN, "--coordinator", cluster.address(), "--name", "w1"},
                   cluster.dir().File("impostor.log"));
  REQUIRE(WaitUntil([&] { return impostor.Output().find("held by a live agent") != std::string::npos; },
                    absl::Seconds(10)));
  CHECK(impostor.Running());
}

TEST_CASE("The client fails fast with exit code 4 when no coordinator answers",
          "[integration]") {
  Cluster cluster;  // its port is free: nothing listens there
  absl::Time start = absl::Now();
  CommandResult r = cluster.Cli({"workers"});
  CHECK(r.status.code == 4);
  CHECK(absl::Now() - start < absl::Seconds(10));
  CHECK(r.output.find("cannot reach the coordinator at " + cluster.address()) !=
        std::string::npos);
  // One line, not a stack trace.
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
}

TEST_CASE("The client refuses bad flags with exit code 2", "[integration]") {
  Cluster cluster;
  CHECK(cluster.Cli({"workers", "-o", "yaml"}).status.code == 2);
  CHECK(cluster.Cli({"no-such-command"}).status.code == 2);
  CommandResult r = RunCommand({COHORT_CLIENT_BIN, "--coordinator", "nohost", "workers"});
  CHECK(r.status.code == 2);
  CHECK(r.output.find("address 'nohost' has no port") != std::string::npos);
  CommandResult v = RunCommand({COHORT_CLIENT_BIN, "version"});
  CHECK(v.status.code == 0);
  CHECK(v.out.rfind("cohort ", 0) == 0);
}

}  // namespace
}  // namespace cohort::testing
