// An agent started the way the Kubernetes DaemonSet starts it
// (deploy/k8s/base/agent-daemonset.yaml): no --name or --advertise-address, the
// identity in the environment the pod gives it (NODE_NAME, POD_IP, the device plugin's
// NVIDIA_VISIBLE_DEVICES), the coordinator's Service name replaced by loopback. It must
// register under the node's name with the pod's address, which other pods' ranks then
// connect to. Its gRPC health endpoint (--health-listen, what the DaemonSet's native
// gRPC probes ask) is checked with Python's grpcio: readiness follows the lease with the
// coordinator, liveness holds until the agent shuts down.

#include <signal.h>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/integration/cluster.h"
#include "tests/support/ports.h"
#include "tests/support/process.h"

namespace cohort::testing {
namespace {

// The container's environment, as the DaemonSet and the ConfigMap set it.
std::map<std::string, std::string> PodEnvironment(const Cluster& cluster) {
  return {{"COHORT_COORDINATOR", cluster.address()},  // was cohort-coordinator:7070
          {"NODE_NAME", "node-a.pool-1"},
          {"POD_IP", "127.0.0.2"},  // loopback, but not what routes to the coordinator
          {"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
          {"GLOO_SOCKET_IFNAME", "lo"},
          {"COHORT_SLOTS", "2"},
          {"COHORT_LOG_LEVEL", "info"}};
}

// The DaemonSet's args after Kubernetes expanded $(COHORT_SLOTS) and $(COHORT_LOG_LEVEL).
std::vector<std::string> PodArgs() { return {COHORT_WORKER_BIN, "--slots=2", "--log-level=info"}; }

TEST_CASE("An agent in a pod registers under its node name with the pod's IP",
          "[integration][kubernetes]") {
  Cluster cluster;
  REQUIRE(cluster.StartServer());
  Process agent(PodArgs(), cluster.dir().File("agent.log"), PodEnvironment(cluster));
  REQUIRE(cluster.WaitForWorkerState("node-a.pool-1", "alive"));
  auto workers = cluster.Workers();
  REQUIRE(workers.size() == 1);
  nlohmann::json w = workers["node-a.pool-1"];
  CHECK(w["address"] == "127.0.0.2");
  CHECK(w["cpu_slots"] == 2);
  CHECK(agent.Output().find("worker name node-a.pool-1 (NODE_NAME)") != std::string::npos);
  CHECK(agent.Output().find("advertising 127.0.0.2 (POD_IP)") != std::string::npos);
}

TEST_CASE("Flags given to an agent in a pod win over what the pod says",
          "[integration][kubernetes]") {
  Cluster cluster;
  REQUIRE(cluster.StartServer());
  std::vector<std::string> args = PodArgs();
  args.insert(args.end(), {"--name", "explicit", "--advertise-address", "127.0.0.3"});
  Process agent(args, cluster.dir().File("agent.log"), PodEnvironment(cluster));
  REQUIRE(cluster.WaitForWorkerState("explicit", "alive"));
  auto workers = cluster.Workers();
  CHECK(workers.count("node-a.pool-1") == 0);
  CHECK(workers["explicit"]["address"] == "127.0.0.3");
}

TEST_CASE("An agent given GPUs by the device plugin advertises no more than LibTorch sees",
          "[integration][kubernetes]") {
  Cluster cluster;
  REQUIRE(cluster.StartServer());
  auto env = PodEnvironment(cluster);
  env["NVIDIA_VISIBLE_DEVICES"] =
      "GPU-8f6a2c1e-0000-1111-2222-333344445555,GPU-1b2c3d4e-aaaa-bbbb-cccc-ddddeeeeffff";
  Process agent(PodArgs(), cluster.dir().File("agent.log"), env);
  REQUIRE(cluster.WaitForWorkerState("node-a.pool-1", "alive"));
  nlohmann::json w = cluster.Workers()["node-a.pool-1"];
  CHECK(w["address"] == "127.0.0.2");
  REQUIRE(w["gpus"].is_array());
  CHECK(w["gpus"].size() <= 2);
  if (w["gpus"].size() < 2) {
    // A CPU-only LibTorch (or fewer GPUs than the pod was given): said in the log.
    CHECK(agent.Output().find("the pod was given 2 GPUs but LibTorch sees") != std::string::npos);
  }
}

TEST_CASE("An agent in a pod with an unusable POD_IP falls back to the routed address",
          "[integration][kubernetes]") {
  Cluster cluster;
  REQUIRE(cluster.StartServer());
  auto env = PodEnvironment(cluster);
  env["POD_IP"] = "not-an-address";
  Process agent(PodArgs(), cluster.dir().File("agent.log"), env);
  REQUIRE(cluster.WaitForWorkerState("node-a.pool-1", "alive"));
  CHECK(cluster.Workers()["node-a.pool-1"]["address"] == "127.0.0.1");
  CHECK(agent.Output().find("POD_IP 'not-an-address' is not an IP address") != std::string::npos);
}

const std::string kProbe = std::string(COHORT_SOURCE_DIR) + "/tests/integration/grpc_probe.py";

// The status grpc.health.v1 reports for `service` at `address` (SERVING, NOT_SERVING,
// NOT_FOUND, or the call's error code).
std::string Health(const std::string& address, const std::string& service) {
  CommandResult r = RunCommand({COHORT_VENV_PYTHON, kProbe, "health", address, service},
                               absl::Seconds(30));
  return std::string(absl::StripAsciiWhitespace(r.out));
}

TEST_CASE("An agent's gRPC health: ready while it holds a lease, live until it stops",
          "[integration][kubernetes][health]") {
  Cluster cluster;  // its coordinator starts later
  const std::string health = absl::StrCat("127.0.0.1:", FreePort());
  std::vector<std::string> args = PodArgs();
  args.push_back("--health-listen=" + health);
  Process agent(args, cluster.dir().File("agent.log"), PodEnvironment(cluster));
  REQUIRE(WaitUntil([&] { return Health(health, "liveness") == "SERVING"; }, absl::Seconds(30)));
  // No coordinator yet: alive, but not ready.
  CHECK(Health(health, "") == "NOT_SERVING");
  CHECK(Health(health, "cohort.v1.WorkerService") == "NOT_FOUND");

  REQUIRE(cluster.StartServer());
  REQUIRE(cluster.WaitForWorkerState("node-a.pool-1", "alive"));
  CHECK(WaitUntil([&] { return Health(health, "") == "SERVING"; }, absl::Seconds(30)));
  // The coordinator goes away: not ready (its heartbeats fail), still alive.
  cluster.StopServer();
  CHECK(WaitUntil([&] { return Health(health, "") == "NOT_SERVING"; }, absl::Seconds(30)));
  CHECK(Health(health, "liveness") == "SERVING");
  // Back: it registers again and is ready.
  REQUIRE(cluster.StartServer());
  CHECK(WaitUntil([&] { return Health(health, "") == "SERVING"; }, absl::Seconds(30)));

  // SIGTERM: NOT_SERVING on both from the moment the agent starts shutting down.
  const std::string watch_log = cluster.dir().File("liveness.log");
  Process watcher({COHORT_VENV_PYTHON, kProbe, "watch-health", health, watch_log, "liveness"},
                  cluster.dir().File("watcher.log"));
  REQUIRE(WaitUntil([&] { return absl::StrContains(ReadFile(watch_log), "SERVING"); },
                    absl::Seconds(20)));
  agent.Signal(SIGTERM);
  std::optional<ExitStatus> exit = agent.Wait(absl::Seconds(30));
  REQUIRE(exit.has_value());
  CHECK(exit->code == 0);
  REQUIRE(watcher.Wait(absl::Seconds(30)).has_value());
  INFO(ReadFile(watch_log));
  CHECK(absl::StrContains(ReadFile(watch_log), "SERVING\nNOT_SERVING\n"));
  CHECK(Health(health, "liveness") == "UNAVAILABLE");  // gone with the process
}

TEST_CASE("A bad or busy --health-listen stops the agent with a named error",
          "[integration][kubernetes][health]") {
  Cluster cluster;
  CommandResult bad = RunCommand({COHORT_WORKER_BIN, "--coordinator", cluster.address(),
                                  "--health-listen", "nowhere"});
  CHECK(bad.status.code != 0);
  CHECK(absl::StrContains(bad.output, "--health-listen"));
  const std::string health = absl::StrCat("127.0.0.1:", FreePort());
  Process first({COHORT_WORKER_BIN, "--coordinator", cluster.address(), "--name", "first",
                 "--work-dir", cluster.dir().File("first"), "--health-listen", health},
                cluster.dir().File("first.log"));
  REQUIRE(WaitUntil([&] { return Health(health, "liveness") == "SERVING"; }, absl::Seconds(30)));
  CommandResult busy = RunCommand({COHORT_WORKER_BIN, "--coordinator", cluster.address(),
                                   "--name", "second", "--work-dir", cluster.dir().File("second"),
                                   "--health-listen", health});
  CHECK(busy.status.code != 0);
  CHECK(absl::StrContains(busy.output, "--health-listen " + health + ": cannot listen there"));
}

}  // namespace
}  // namespace cohort::testing
