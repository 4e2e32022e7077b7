// An agent started the way the Kubernetes DaemonSet starts it
// (deploy/k8s/base/agent-daemonset.yaml): no --name or --advertise-address, the
// identity in the environment the pod gives it (NODE_NAME, POD_IP, the device plugin's
// NVIDIA_VISIBLE_DEVICES), the coordinator's Service name replaced by loopback. It must
// register under the node's name with the pod's address, which other pods' ranks then
// connect to.

#include <catch2/catch.hpp>

#include "tests/integration/cluster.h"

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

}  // namespace
}  // namespace cohort::testing
