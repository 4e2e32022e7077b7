// A network partition of one agent (docs/reliability.md): the agent and its trainers
// run in a network namespace of their own, joined to this machine by a veth pair; the
// coordinator and the other agents listen on the host end's address. Mid-job the link
// goes down: the coordinator must declare the worker lost, fail the attempt naming it,
// and finish the job on the spare agent with the undisturbed run's weights.
//
// Needs CAP_NET_ADMIN (ip netns, ip link). Without it the test exits with code 77,
// which ctest reports as skipped, with the reason on stderr.

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/faults/fault_harness.h"
#include "tests/support/process.h"

namespace cohort::testing {
namespace {

constexpr char kIp[] = "/sbin/ip";

CommandResult Ip(std::vector<std::string> args) {
  args.insert(args.begin(), kIp);
  return RunCommand(args, absl::Seconds(30));
}

// A network namespace and a veth pair between it and this machine, removed (with
// every process still inside) on destruction, also when the test fails.
class Netns {
 public:
  Netns() {
    const int id = getpid() % 250 + 1;
    name_ = absl::StrCat("cohort-faults-", getpid());
    host_if_ = absl::StrCat("cfh", getpid());
    ns_if_ = absl::StrCat("cfn", getpid());
    host_ip_ = absl::StrCat("10.213.", id, ".1");
    ns_ip_ = absl::StrCat("10.213.", id, ".2");
    CommandResult added = Ip({"netns", "add", name_});
    if (added.status.code != 0) {
      std::fprintf(stderr,
                   "SKIPPED: cannot create a network namespace (needs root or CAP_NET_ADMIN "
                   "and iproute2, scripts/setup): %s\n",
                   added.output.c_str());
      std::exit(77);
    }
    created_ = true;
    for (const std::vector<std::string>& step :
         std::vector<std::vector<std::string>>{
             {"link", "add", host_if_, "type", "veth", "peer", "name", ns_if_},
             {"link", "set", ns_if_, "netns", name_},
             {"addr", "add", host_ip_ + "/24", "dev", host_if_},
             {"link", "set", host_if_, "up"},
             {"netns", "exec", name_, kIp, "addr", "add", ns_ip_ + "/24", "dev", ns_if_},
             {"netns", "exec", name_, kIp, "link", "set", ns_if_, "up"},
             {"netns", "exec", name_, kIp, "link", "set", "lo", "up"}}) {
      CommandResult r = Ip(step);
      INFO("ip " << absl::StrJoin(step, " ") << ": " << r.output);
      REQUIRE(r.status.code == 0);
    }
  }
  ~Netns() {
    if (!created_) return;
    CommandResult pids = Ip({"netns", "pids", name_});
    for (absl::string_view line : absl::StrSplit(pids.out, '\n', absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(line, &pid) && pid > 0) kill(pid, SIGKILL);
    }
    Ip({"link", "del", host_if_});  // both ends go
    Ip({"netns", "del", name_});
  }

  const std::string& host_ip() const { return host_ip_; }
  std::vector<std::string> Exec() const { return {kIp, "netns", "exec", name_}; }
  // Cuts the link: nothing gets through either way, and nothing says so (no RST).
  void Cut() {
    CommandResult r = Ip({"link", "set", host_if_, "down"});
    INFO(r.output);
    REQUIRE(r.status.code == 0);
  }

 private:
  bool created_ = false;
  std::string name_, host_if_, ns_if_, host_ip_, ns_ip_;
};

TEST_CASE("An agent cut off by a network partition is declared lost and the job ends elsewhere",
          "[faults]") {
  std::mt19937_64 rng = SeededRandom("partition");
  const DigitsData& digits = SharedDigits();
  UndisturbedModel();
  // Rank 0 (on either side) stops while writing a seeded epoch's checkpoint, so the
  // cut falls mid-job however fast the machine trains.
  FaultPoints points(absl::StrCat("checkpoint-write@",
                                  std::uniform_int_distribution<int>(1, kFaultEpochs - 1)(rng)));
  Netns netns;
  Cluster cluster(kFaultLeaseTtl, netns.host_ip());
  cluster.set_server_args({"--insecure"});  // a non-loopback --listen, test-only
  REQUIRE(cluster.StartServer());
  WorkerOptions host;
  host.env = points.env();
  host.extra_args = {"--advertise-address", netns.host_ip()};
  WorkerOptions inside;
  inside.env = points.env();
  inside.wrapper = netns.Exec();
  cluster.StartWorker("w1", host);
  Process& cut_off = cluster.StartWorker("w2", inside);
  REQUIRE(cluster.WaitForWorkerState("w1", "alive", kAgentStartTimeout));
  REQUIRE(cluster.WaitForWorkerState("w2", "alive", kAgentStartTimeout));

  JobClient jobs(cluster.address());
  const std::string id = jobs.Submit(digits.Write(FaultJob("partitioned")));
  points.WaitForHit();
  v1::Job job = jobs.Get(id);
  REQUIRE(job.attempt() == 1);
  REQUIRE(WorkerOfRank(job, 0) != WorkerOfRank(job, 1));
  cluster.StartWorker("w3", host);  // the spare
  REQUIRE(cluster.WaitForWorkerState("w3", "alive", kAgentStartTimeout));
  netns.Cut();
  points.Release();

  REQUIRE(cluster.WaitForWorkerState("w2", "lost", absl::Seconds(60)));
  job = jobs.WaitForState(id, v1::JOB_STATE_SUCCEEDED, absl::Seconds(300));
  CHECK(job.attempt() == 2);
  CHECK(job.restarts() == 1);
  CHECK(WorkerOfRank(job, 0) != "w2");
  CHECK(WorkerOfRank(job, 1) != "w2");
  const std::vector<v1::JobEvent> events = jobs.Events(id);
  INFO("events:\n" << DescribeEvents(events));
  CheckNothingLost(events, v1::JOB_STATE_SUCCEEDED);
  const std::string why = AttemptFailure(events, 1);
  INFO("the first attempt's failure: " << why);
  std::fprintf(stderr, "observed: %s\n", why.c_str());
  CHECK(absl::StrContains(why, "worker 'w2'"));
  CHECK(Listed(cluster, id));
  CheckSameWeights(cluster.data_dir() + "/jobs/" + id + "/model.keras");

  cut_off.Signal(SIGKILL);  // it cannot say goodbye: the coordinator is out of reach
  REQUIRE(cut_off.Wait(absl::Seconds(30)).has_value());
  StopAndCheckNothingLeft(cluster, {"w1", "w3"});
}

}  // namespace
}  // namespace cohort::testing
