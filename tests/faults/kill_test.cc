// SIGKILL at seeded points of a job (issue 8 item 4, docs/reliability.md): a trainer, an
// agent or the coordinator is killed while a rank waits in the rendezvous, mid-step
// (gradients summed, weights not yet updated), mid-checkpoint-write (half the zip on
// disk) or mid-upload (a checkpoint's or the model's stream open). A fault point
// (common/fault_point.h) holds the process still at that place; the seed printed on
// stderr picks the rank, the step, the epoch and the file. After each: the job
// SUCCEEDED after a new attempt, with the same weights as an undisturbed run; every
// event is there; no process is left.

#include <signal.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/faults/fault_harness.h"
#include "tests/support/process.h"

namespace cohort::testing {
namespace {

enum class Victim { kTrainer, kAgent, kCoordinator };
enum class Place { kRendezvous, kStep, kCheckpointWrite, kUpload };

const char* Name(Victim v) {
  switch (v) {
    case Victim::kTrainer: return "trainer";
    case Victim::kAgent: return "agent";
    case Victim::kCoordinator: return "coordinator";
  }
  return "?";
}

struct Fault {
  Victim victim;
  std::string point;  // COHORT_FAULT_POINT
  int rank = 0;       // whose process stops there
  std::string Describe() const { return absl::StrCat("SIGKILL ", Name(victim), " at ", point); }
};

// Where in the job `place` is hit, picked by `rng`.
Fault Pick(Victim victim, Place place, std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Fault f{victim, "", 0};
  switch (place) {
    case Place::kRendezvous:
      f.rank = pick(0, 1);
      f.point = absl::StrCat("rank", f.rank, "-rendezvous");
      break;
    case Place::kStep:
      f.rank = pick(0, 1);
      f.point = absl::StrCat("rank", f.rank, "-step@", pick(1, kFaultEpochs * kStepsPerEpoch - 1));
      break;
    case Place::kCheckpointWrite:
      f.point = absl::StrCat("checkpoint-write@", pick(1, kFaultEpochs));
      break;
    case Place::kUpload: {
      // A trainer is killed while its agent uploads one of its earlier checkpoints (it
      // has ended by the last one); the others also while the model goes up.
      int last = victim == Victim::kTrainer ? kFaultEpochs - 1 : kFaultEpochs + 1;
      int which = pick(1, last);
      f.point = which > kFaultEpochs ? "upload-model.keras"
                                     : absl::StrFormat("upload-ckpt-epoch-%06d.zip", which);
      break;
    }
  }
  return f;
}

// The trainer of `rank` in `attempt` of the job (its job.yaml is per attempt); 0 if none.
int TrainerPid(const std::string& job_id, int attempt, int rank) {
  std::string found = ProcessesMatching(
      absl::StrCat("jobs/", job_id, "/attempt-", attempt, "/job.yaml --rank ", rank, " "));
  int pid = 0;
  return std::sscanf(found.c_str(), "%d", &pid) == 1 ? pid : 0;
}

void RunFault(const Fault& fault) {
  INFO(fault.Describe());
  std::fprintf(stderr, "fault: %s\n", fault.Describe().c_str());
  const DigitsData& digits = SharedDigits();
  UndisturbedModel();  // before the cluster loads the cores
  FaultPoints points(fault.point);
  Cluster cluster(kFaultLeaseTtl);
  const std::vector<std::string> workers{"w1", "w2", "w3"};  // one spare for a lost agent
  StartFaultCluster(cluster, points, workers);

  std::string id;
  int attempt_at_fault = 0, restarts_at_fault = 0;
  {
    JobClient jobs(cluster.address());
    id = jobs.Submit(digits.Write(FaultJob("fault")));
    const int pid = points.WaitForHit();
    const v1::Job job = jobs.Get(id);
    // Usually attempt 1; on a machine loaded enough an earlier attempt may have failed.
    attempt_at_fault = job.attempt();
    restarts_at_fault = job.restarts();
    INFO("job at the fault: attempt " << job.attempt() << ", state " << StateName(job.state()));
    REQUIRE(job.state() != v1::JOB_STATE_SUCCEEDED);
    switch (fault.victim) {
      case Victim::kTrainer: {
        // At an upload the agent stopped; its rank 0 trainer trains on.
        int trainer =
            fault.point.rfind("upload-", 0) == 0 ? TrainerPid(id, attempt_at_fault, 0) : pid;
        REQUIRE(trainer > 0);
        REQUIRE(kill(trainer, SIGKILL) == 0);
        break;
      }
      case Victim::kAgent: {
        std::string worker = WorkerOfRank(job, fault.rank);
        REQUIRE(!worker.empty());
        cluster.worker(worker).Signal(SIGKILL);  // its trainers die with it
        break;
      }
      case Victim::kCoordinator:
        cluster.server().Signal(SIGKILL);
        REQUIRE(cluster.server().Wait(absl::Seconds(10)).has_value());
        REQUIRE(cluster.StartServer());
        break;
    }
  }
  points.Release();  // a process still held there (not the victim) goes on

  JobClient jobs(cluster.address());
  v1::Job job = jobs.WaitForState(id, v1::JOB_STATE_SUCCEEDED, absl::Seconds(300));
  const std::vector<v1::JobEvent> events = jobs.Events(id);
  INFO("events:\n" << DescribeEvents(events));
  CHECK(job.attempt() > attempt_at_fault);  // the fault was felt: its attempt did not finish
  if (fault.victim == Victim::kCoordinator) {
    CHECK(job.restarts() == restarts_at_fault);  // a coordinator restart is not the job's failure
  } else {
    CHECK(job.restarts() > restarts_at_fault);
  }
  std::fprintf(stderr, "observed: SUCCEEDED in attempt %d, %d restart(s)\n", job.attempt(),
               job.restarts());
  CheckNothingLost(events, v1::JOB_STATE_SUCCEEDED);
  CHECK(Listed(cluster, id));
  CheckNothingHalfWritten(cluster.data_dir(), job);
  CheckSameWeights(cluster.data_dir() + "/jobs/" + id + "/model.keras");
  REQUIRE(WaitUntil([&] { return ProcessesMatching("/jobs/" + id + "/").empty(); },
                    absl::Seconds(30)));
  StopAndCheckNothingLeft(cluster, workers);
}

void RunEveryPlace(Victim victim) {
  std::mt19937_64 rng = SeededRandom(absl::StrCat("SIGKILL of the ", Name(victim)));
  for (Place place : {Place::kRendezvous, Place::kStep, Place::kCheckpointWrite, Place::kUpload}) {
    RunFault(Pick(victim, place, rng));
  }
}

TEST_CASE("A trainer SIGKILLed in the rendezvous, mid-step, mid-checkpoint-write or mid-upload",
          "[faults]") {
  RunEveryPlace(Victim::kTrainer);
}

TEST_CASE("An agent SIGKILLed in the rendezvous, mid-step, mid-checkpoint-write or mid-upload",
          "[faults]") {
  RunEveryPlace(Victim::kAgent);
}

TEST_CASE("The coordinator SIGKILLed in the rendezvous, mid-step, mid-checkpoint-write or "
          "mid-upload",
          "[faults]") {
  RunEveryPlace(Victim::kCoordinator);
}

}  // namespace
}  // namespace cohort::testing
