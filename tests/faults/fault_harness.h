#pragma once

// The fault-injection suite's shared pieces (tests/faults/, docs/reliability.md): a
// seeded random source whose seed the output prints, the fault points of
// common/fault_point.h seen from the test (arm, wait for the hit, release), the small
// digits job every fault runs and its undisturbed result, and the end-of-test checks
// (same weights, nothing lost, no process left).

#include <cstdint>
#include <map>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/time/time.h"
#include "cohort/v1/job_service.pb.h"
#include "tests/integration/cluster.h"
#include "tests/integration/job_client.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {

// Long enough that a 2-core machine loaded by other builds too misses no heartbeat
// while two trainers run (3 s, as job_test uses, was not always).
inline constexpr char kFaultLeaseTtl[] = "5s";
// How long an agent may take to register on such a machine.
inline constexpr absl::Duration kAgentStartTimeout = absl::Seconds(60);

// The job every fault runs: digits_cnn, 2 ranks, 3 epochs of batch 64 (23 steps each),
// a checkpoint after each epoch, 3 restarts allowed.
DigitsJob FaultJob(const std::string& name);
inline constexpr int kFaultEpochs = 3;
inline constexpr int kStepsPerEpoch = 23;  // ceil(1437 / 64)

// The digits arrays, made once per test process.
const DigitsData& SharedDigits();

// A random source seeded from COHORT_FAULT_SEED, or at random; the seed is printed on
// stderr with how to rerun with it.
std::mt19937_64 SeededRandom(const std::string& test);

// Fault points armed for the processes started with env(): see common/fault_point.h.
class FaultPoints {
 public:
  // Arms `point` ("NAME" or "NAME@N").
  explicit FaultPoints(const std::string& point);
  std::map<std::string, std::string> env() const;
  const std::string& name() const { return name_; }
  // Waits until a process has stopped at the point; returns its pid (REQUIREd).
  int WaitForHit(absl::Duration timeout = absl::Seconds(240));
  // Lets a process still stopped there go on.
  void Release();

 private:
  TempDir dir_;
  std::string point_;
  std::string name_;
};

// model.keras of FaultJob trained undisturbed by two `cohort-worker train` ranks (the
// trainer the agents run, with the same default thread count), once per test process.
const std::string& UndisturbedModel();

// CHECKs that `model` holds bit for bit the variables of UndisturbedModel().
void CheckSameWeights(const std::string& model);

// Every file under the job's folder of the coordinator's `data_dir` is one of its
// recorded artifacts, of the recorded size; nothing is left in incoming/ or anywhere
// as a temporary file.
void CheckNothingHalfWritten(const std::string& data_dir, const v1::Job& job);

// The job's events but its step progress, one line each, for a failure's message.
std::string DescribeEvents(const std::vector<v1::JobEvent>& events);

// The coordinator's log line saying why `attempt` failed ("attempt N failed: ..."), or "".
std::string AttemptFailure(const std::vector<v1::JobEvent>& events, int attempt);

// The pids of every process whose command line contains `text` (pgrep -f).
std::string ProcessesMatching(const std::string& text);

// Starts the coordinator and an agent per name in `workers`, each with `points` armed,
// and REQUIREs that all of them register.
void StartFaultCluster(Cluster& cluster, const FaultPoints& points,
                       const std::vector<std::string>& workers);

// Stops the agents and the coordinator (SIGTERM; they must exit) and REQUIREs that no
// process started for `cluster` (its directory in the command line) is left.
void StopAndCheckNothingLeft(Cluster& cluster, const std::vector<std::string>& workers);

// The job in the coordinator's job list (ListJobs through the CLI; a call the loaded
// coordinator does not answer in time is tried again, for up to a minute).
bool Listed(Cluster& cluster, const std::string& job_id);

}  // namespace cohort::testing
