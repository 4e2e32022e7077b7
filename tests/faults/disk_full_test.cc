// The coordinator's artifact disk full (docs/reliability.md): its data directory is a
// small tmpfs (its SQLite database, linked from there, stays on the test's own disk,
// as when artifacts have a volume of their own). Mid-job the tmpfs is filled: the
// checkpoint uploads after that and the model's fail with ENOSPC, so the first attempt
// fails with a reason naming the full disk; the coordinator keeps answering; nothing
// half-written is left anywhere; once space is freed the job finishes with the
// undisturbed run's weights.
//
// Needs CAP_SYS_ADMIN (mount -t tmpfs). Without it the test exits with code 77, which
// ctest reports as skipped, with the reason on stderr.

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/faults/fault_harness.h"
#include "tests/support/process.h"

namespace cohort::testing {
namespace {

namespace fs = std::filesystem;

// A tmpfs of `size` mounted at `dir` (created), lazily unmounted on destruction.
class Tmpfs {
 public:
  Tmpfs(const std::string& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    CommandResult r = RunCommand({"/bin/mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", dir});
    if (r.status.code != 0) {
      std::fprintf(stderr, "SKIPPED: cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): %s\n",
                   r.output.c_str());
      std::exit(77);
    }
  }
  ~Tmpfs() { RunCommand({"/bin/umount", "-l", dir_}); }

 private:
  std::string dir_;
};

// Takes every free block of the filesystem of `dir` with one file; returns its path.
std::string Fill(const std::string& dir) {
  struct statvfs st {};
  REQUIRE(statvfs(dir.c_str(), &st) == 0);
  const std::string path = dir + "/filler";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  off_t free_bytes = static_cast<off_t>(st.f_bavail) * static_cast<off_t>(st.f_frsize);
  REQUIRE(posix_fallocate(fd, 0, free_bytes) == 0);
  close(fd);
  REQUIRE(statvfs(dir.c_str(), &st) == 0);
  INFO(st.f_bavail << " blocks still free");
  REQUIRE(st.f_bavail == 0);
  return path;
}

TEST_CASE("The coordinator's artifact disk full: uploads fail naming it, then the job succeeds",
          "[faults]") {
  std::mt19937_64 rng = SeededRandom("disk full");
  const DigitsData& digits = SharedDigits();
  UndisturbedModel();
  Cluster cluster(kFaultLeaseTtl);
  Tmpfs tmpfs(cluster.data_dir(), "16m");
  // The job store stays on the test's disk: SQLite follows the link.
  fs::create_directories(cluster.dir().File("db"));
  fs::create_symlink(cluster.dir().File("db/cohort.db"), cluster.data_dir() + "/cohort.db");

  // Rank 0 stops mid-way through epoch 2 (epoch 1's checkpoint stored) while the disk fills.
  const int step = std::uniform_int_distribution<int>(2, kStepsPerEpoch - 2)(rng);
  FaultPoints points(absl::StrCat("rank0-step@", kStepsPerEpoch + step));
  const std::vector<std::string> workers{"w1", "w2"};
  StartFaultCluster(cluster, points, workers);
  REQUIRE(fs::exists(cluster.dir().File("db/cohort.db")));

  JobClient jobs(cluster.address());
  const std::string id = jobs.Submit(digits.Write(FaultJob("full")));
  points.WaitForHit();
  REQUIRE(jobs.WaitFor(
      id, [](const v1::Job& j) { return HasArtifact(j, "checkpoints/ckpt-epoch-000001.zip"); },
      absl::Seconds(60)));
  const std::string filler = Fill(cluster.data_dir());
  points.Release();

  // The model's upload fails, so the attempt does, naming the disk.
  v1::Job job;
  REQUIRE(jobs.WaitFor(
      id,
      [&](const v1::Job& j) {
        job = j;
        return j.restarts() >= 1 || j.state() == v1::JOB_STATE_FAILED;
      },
      absl::Seconds(300)));
  // The coordinator keeps serving while its disk is full.
  CHECK(Listed(cluster, id));
  CHECK(cluster.Cli({"workers"}).status.code == 0);
  REQUIRE(fs::remove(filler));

  job = jobs.WaitForState(id, v1::JOB_STATE_SUCCEEDED, absl::Seconds(300));
  CHECK(job.attempt() >= 2);
  const std::vector<v1::JobEvent> events = jobs.Events(id);
  INFO("events:\n" << DescribeEvents(events));
  CheckNothingLost(events, v1::JOB_STATE_SUCCEEDED);
  const std::string failure = AttemptFailure(events, 1);
  INFO("the first attempt's failure: " << failure);
  std::fprintf(stderr, "observed: %s\n", failure.c_str());
  CHECK(absl::StrContains(failure, "model.keras"));
  CHECK(absl::StrContains(failure, "No space left on device"));
  CheckNothingHalfWritten(cluster.data_dir(), job);
  CheckSameWeights(cluster.data_dir() + "/jobs/" + id + "/model.keras");
  StopAndCheckNothingLeft(cluster, workers);
}

}  // namespace
}  // namespace cohort::testing
