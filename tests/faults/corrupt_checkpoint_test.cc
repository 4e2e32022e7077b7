// A damaged latest checkpoint (docs/reliability.md, docs/job-server.md "Checkpoints"):
// the coordinator's copy of the newest checkpoint has bytes flipped (same size) while
// the job runs; then rank 0's agent is SIGKILLed, so the next attempt's rank 0 runs on
// a host without checkpoints of its own and must resume from the coordinator's. The
// coordinator checks a checkpoint's SHA-256 against the one recorded at upload before
// resuming from it: the damaged one is dropped (a warning in the job's events) and the
// attempt resumes from the previous one, ending with the undisturbed run's weights.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/faults/fault_harness.h"
#include "tests/support/process.h"

namespace cohort::testing {
namespace {

// Overwrites `count` bytes at `offset` with their complement (the size stays).
void FlipBytes(const std::string& path, int64_t offset, int count) {
  int fd = open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  std::string bytes(count, '\0');
  REQUIRE(pread(fd, bytes.data(), count, offset) == count);
  for (char& c : bytes) c = static_cast<char>(~c);
  REQUIRE(pwrite(fd, bytes.data(), count, offset) == count);
  close(fd);
}

TEST_CASE("A damaged latest checkpoint: the job resumes from the previous one", "[faults]") {
  std::mt19937_64 rng = SeededRandom("damaged checkpoint");
  const DigitsData& digits = SharedDigits();
  UndisturbedModel();
  // Rank 0 stops mid-way through the last epoch, once the earlier epochs' checkpoints
  // are written; the newest of them is then damaged.
  const int step = std::uniform_int_distribution<int>(2, kStepsPerEpoch - 2)(rng);
  FaultPoints points(absl::StrCat("rank0-step@", (kFaultEpochs - 1) * kStepsPerEpoch + step));
  Cluster cluster(kFaultLeaseTtl);
  const std::vector<std::string> workers{"w1", "w2", "w3"};
  StartFaultCluster(cluster, points, workers);

  JobClient jobs(cluster.address());
  const std::string id = jobs.Submit(digits.Write(FaultJob("damaged")));
  points.WaitForHit();
  const std::string newest =
      absl::StrFormat("checkpoints/ckpt-epoch-%06d.zip", kFaultEpochs - 1);
  REQUIRE(jobs.WaitFor(id, [&](const v1::Job& j) { return HasArtifact(j, newest); },
                       absl::Seconds(60)));
  const std::string file = cluster.data_dir() + "/jobs/" + id + "/" + newest;
  const int64_t size = static_cast<int64_t>(ReadFile(file).size());
  REQUIRE(size > 1000);
  const int64_t offset = std::uniform_int_distribution<int64_t>(100, size - 100)(rng);
  INFO("flipped 16 bytes at " << offset << " of " << file);
  FlipBytes(file, offset, 16);

  v1::Job job = jobs.Get(id);
  const std::string victim = WorkerOfRank(job, 0);
  REQUIRE(!victim.empty());
  cluster.worker(victim).Signal(SIGKILL);
  points.Release();

  job = jobs.WaitForState(id, v1::JOB_STATE_SUCCEEDED, absl::Seconds(300));
  const std::vector<v1::JobEvent> events = jobs.Events(id);
  INFO("events:\n" << DescribeEvents(events));
  CHECK(job.attempt() == 2);
  CHECK(WorkerOfRank(job, 0) != victim);
  CheckNothingLost(events, v1::JOB_STATE_SUCCEEDED);
  bool warned = false;
  for (const v1::JobEvent& e : events) {
    if (e.has_log() && e.log().rank() == -1 &&
        absl::StrContains(e.log().text(), "dropped the damaged checkpoint '" + newest + "'")) {
      warned = true;
      std::fprintf(stderr, "observed: %s\n", e.log().text().c_str());
      CHECK(absl::StrContains(e.log().text(), "resumes from 'checkpoints/ckpt-epoch-000001.zip'"));
    }
  }
  CHECK(warned);
  // Resumed after epoch 1: the second attempt ran epochs 2 and 3, not all three.
  CHECK(EndedEpochs(events, 2) == std::set<int>{2, 3});
  CheckNothingHalfWritten(cluster.data_dir(), job);
  CheckSameWeights(cluster.data_dir() + "/jobs/" + id + "/model.keras");
  REQUIRE(WaitUntil([&] { return ProcessesMatching("/jobs/" + id + "/").empty(); },
                    absl::Seconds(30)));
  StopAndCheckNothingLeft(cluster, workers);
}

}  // namespace
}  // namespace cohort::testing
