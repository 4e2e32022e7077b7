// The collective contract (collective.h), checked against every backend with real
// processes: each case starts N ranks of collective_rank_helper sharing a FileStore
// directory. Gloo cases always run; NCCL cases carry [gpu] and skip themselves, with a
// message, where the machine has fewer GPUs than they need (one rank is a valid NCCL
// run: it goes through the whole code path).

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#if COHORT_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::trainer::collective {
namespace {

using cohort::testing::Process;
using cohort::testing::TempDir;

// kGloo: Gloo as ranks on one machine run it (all-reduce through shared memory);
// kGlooTcp: every operation over loopback TCP, as ranks on several machines run it.
enum class Backend { kGloo, kGlooTcp, kNccl };

const char* Name(Backend b) {
  switch (b) {
    case Backend::kGloo: return "gloo";
    case Backend::kGlooTcp: return "gloo-tcp";
    case Backend::kNccl: return "nccl";
  }
  return "";
}

// How the ranks of a world of `size` say their all-reduces travel.
const char* Transport(Backend b, int size) {
  if (b == Backend::kNccl) return "nccl";
  return b == Backend::kGloo && size > 1 ? "shared memory" : "tcp";
}

// Asked in the test process, which never uses CUDA otherwise: the ranks are fresh
// processes (fork + exec), so the CUDA state made here does not leak into them.
int GpuCount() {
#if COHORT_HAVE_NCCL
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
#else
  return 0;
#endif
}

// The world sizes a case runs with: all of `wanted` for gloo; for nccl the ones this
// machine has GPUs for (one GPU per rank), and one rank when only one GPU is present.
std::vector<int> SizesFor(Backend backend, std::vector<int> wanted) {
  if (backend != Backend::kNccl) return wanted;
  int gpus = GpuCount();
  std::vector<int> out;
  for (int n : wanted) {
    if (n <= gpus) out.push_back(n);
  }
  if (out.empty() && gpus >= 1) out.push_back(1);
  if (out.empty()) WARN("skipped: no GPU here (cudaGetDeviceCount found none)");
  return out;
}

struct Ranks {
  std::unique_ptr<TempDir> dir = std::make_unique<TempDir>();
  std::vector<std::unique_ptr<Process>> processes;
};

// Starts ranks 0..started-1 of a `size`-rank world running `scenario`.
Ranks Start(Backend backend, int size, const std::string& scenario, absl::Duration timeout,
            int started = -1) {
  Ranks ranks;
  if (started < 0) started = size;
  for (int rank = 0; rank < started; ++rank) {
    ranks.processes.push_back(std::make_unique<Process>(
        std::vector<std::string>{COHORT_COLLECTIVE_HELPER, Name(backend), std::to_string(rank),
                                 std::to_string(size), ranks.dir->path(), scenario,
                                 std::to_string(absl::ToInt64Milliseconds(timeout))},
        ranks.dir->File(absl::StrCat("rank-", rank, ".log"))));
  }
  return ranks;
}

void ExpectAllSucceed(Ranks& ranks, const std::string& ok_line, const std::string& transport) {
  for (size_t rank = 0; rank < ranks.processes.size(); ++rank) {
    Process& p = *ranks.processes[rank];
    std::optional<cohort::testing::ExitStatus> exit = p.Wait(absl::Seconds(240));
    INFO("rank " << rank << " output:\n" << p.Output());
    REQUIRE(exit.has_value());
    CHECK(exit->code == 0);
    CHECK(absl::StrContains(p.Output(), "transport: " + transport + "\n"));
    CHECK(absl::StrContains(p.Output(), "ok " + ok_line));
  }
}

// The shared-memory segments rank 0 (process `pid`) named: unlinked during setup, so
// none is ever left behind.
std::vector<std::string> LeftInDevShm(pid_t pid) {
  std::vector<std::string> left;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, absl::StrCat("cohort-allreduce-", pid, "-"))) left.push_back(name);
  }
  return left;
}

void RunScenario(Backend backend, std::vector<int> sizes, const std::string& scenario,
                 const std::string& ok_line) {
  for (int size : SizesFor(backend, sizes)) {
    INFO(Name(backend) << " with " << size << " ranks, scenario " << scenario);
    Ranks ranks = Start(backend, size, scenario, absl::Seconds(60));
    ExpectAllSucceed(ranks, ok_line, Transport(backend, size));
    CHECK(LeftInDevShm(ranks.processes[0]->pid()).empty());
  }
}

void AllReduceSumsExactly(Backend b) {
  RunScenario(b, {1, 2, 3}, "all-reduce", "all-reduce sums exactly");
}
void BroadcastCopiesTheRoot(Backend b) {
  RunScenario(b, {2, 3}, "broadcast", "broadcast copies the root's bytes");
}
void BarrierWaitsForEveryRank(Backend b) {
  RunScenario(b, {2, 3}, "barrier", "barrier waits for every rank");
}
void AsyncAllReducesRunInOrder(Backend b) {
  RunScenario(b, {2, 3}, "async", "async all-reduces run in order");
}
void LargeBuffers(Backend b) {
  RunScenario(b, {2, 3}, "large", "64 MiB all-reduce and 40 MiB broadcast");
}
void SharedMemoryOnlyOnOneMachine(Backend b) {
  RunScenario(b, {2, 3}, "shared",
              b == Backend::kGloo ? "shared memory and its barrier"
                                  : "shared memory only where ranks share it");
}

// Starts `size` ranks all-reducing in a loop, sends `sig` to rank 1 once all run, and
// checks every survivor fails within 3x the timeout, unusable afterwards. Returns the
// survivors' outputs and how long each took to fail.
std::vector<std::pair<std::string, absl::Duration>> FailRank1(
    Backend backend, int size, int sig, absl::Duration timeout,
    const std::string& scenario = "until-failure") {
  Ranks ranks = Start(backend, size, scenario, timeout);
  bool all_running = cohort::testing::WaitUntil(
      [&] {
        return std::all_of(ranks.processes.begin(), ranks.processes.end(), [](auto& p) {
          return absl::StrContains(p->Output(), "running");
        });
      },
      absl::Seconds(60));
  REQUIRE(all_running);
  ranks.processes[1]->Signal(sig);
  absl::Time signalled = absl::Now();
  std::vector<std::pair<std::string, absl::Duration>> survivors;
  for (int rank = 0; rank < size; ++rank) {
    if (rank == 1) continue;
    Process& p = *ranks.processes[rank];
    std::optional<cohort::testing::ExitStatus> exit = p.Wait(3 * timeout);
    absl::Duration took = absl::Now() - signalled;
    INFO("rank " << rank << " output:\n" << p.Output());
    REQUIRE(exit.has_value());  // no hang: it failed within 3x the timeout
    CHECK(exit->code == 3);
    CHECK(absl::StrContains(p.Output(), absl::StrCat("transport: ", Transport(backend, size), "\n")));
    CHECK(absl::StrContains(p.Output(), "after: FAILED_PRECONDITION"));
    survivors.emplace_back(p.Output(), took);
  }
  return survivors;
}

void KilledRankIsNamed(Backend backend) {
  for (int size : SizesFor(backend, {2, 3})) {
    if (size < 2) {
      WARN("skipped: a killed peer needs 2 GPUs");
      continue;
    }
    INFO(Name(backend) << " with " << size << " ranks");
    auto survivors = FailRank1(backend, size, SIGKILL, absl::Seconds(3));
    bool named = false;
    std::string outputs;
    for (const auto& [output, took] : survivors) {
      absl::StrAppend(&outputs, output, "\n");
      INFO(output);
      CHECK((absl::StrContains(output, "error: UNAVAILABLE") ||
             absl::StrContains(output, "error: DEADLINE_EXCEEDED")));
      named = named || absl::StrContains(output, "with rank 1 failed: connection closed");
    }
    // NCCL cannot tell which peer is gone; gloo names it (with 3 ranks a survivor may
    // instead name the other survivor, which closed its connections on failing).
    INFO(outputs);
    if (backend != Backend::kNccl) CHECK(named);
  }
}

void StoppedRankTimesOut(Backend backend) {
  for (int size : SizesFor(backend, {2, 3})) {
    if (size < 2) {
      WARN("skipped: a hung peer needs 2 GPUs");
      continue;
    }
    INFO(Name(backend) << " with " << size << " ranks");
    absl::Duration timeout = absl::Seconds(3);
    auto survivors = FailRank1(backend, size, SIGSTOP, timeout);
    bool timed_out = false;
    for (const auto& [output, took] : survivors) {
      INFO(output);
      timed_out = timed_out || absl::StrContains(output, "timed out after 3s waiting for");
      if (backend != Backend::kNccl && size == 2) {
        CHECK(absl::StrContains(output, "timed out after 3s waiting for rank 1"));
      }
      CHECK(took >= timeout * 0.8);
    }
    CHECK(timed_out);
  }
}

// The last rank of the world never starts (gloo: 3 ranks; nccl: 2, so one GPU will do).
void MissingRankIsNamed(Backend backend) {
  int size = backend == Backend::kNccl ? 2 : 3;
  if (SizesFor(backend, {size - 1}).empty()) return;
  INFO(Name(backend) << ": " << size - 1 << " of " << size << " ranks start");
  absl::Duration timeout = absl::Seconds(2);
  absl::Time start = absl::Now();
  Ranks ranks = Start(backend, size, "all-reduce", timeout, /*started=*/size - 1);
  for (auto& p : ranks.processes) {
    std::optional<cohort::testing::ExitStatus> exit = p->Wait(3 * timeout);
    INFO(p->Output());
    REQUIRE(exit.has_value());
    CHECK(exit->code == 2);
    CHECK(absl::StrContains(p->Output(),
                            absl::StrCat("DEADLINE_EXCEEDED: rendezvous timed out after 2s "
                                         "waiting for rank ",
                                         size - 1, " to join")));
  }
  CHECK(absl::Now() - start < 3 * timeout);
}

// Each contract case is registered once per backend: gloo always, nccl with [gpu].
#if COHORT_HAVE_NCCL
#define NCCL_CONTRACT_CASE(title, check) \
  TEST_CASE("nccl: " title, "[collective][nccl][gpu]") { check(Backend::kNccl); }
#else
#define NCCL_CONTRACT_CASE(title, check)
#endif
#define CONTRACT_CASE(title, check)                                                         \
  TEST_CASE("gloo: " title, "[collective][gloo]") { check(Backend::kGloo); }           \
  TEST_CASE("gloo-tcp: " title, "[collective][gloo]") { check(Backend::kGlooTcp); }    \
  NCCL_CONTRACT_CASE(title, check)

CONTRACT_CASE("all-reduce sums exactly, 1 to 3 ranks, 0 to 1M floats", AllReduceSumsExactly)
CONTRACT_CASE("broadcast copies the root's bytes to every rank", BroadcastCopiesTheRoot)
CONTRACT_CASE("barrier returns only after every rank reached it", BarrierWaitsForEveryRank)
CONTRACT_CASE("started all-reduces of many buckets run in order, waited in any order",
              AsyncAllReducesRunInOrder)
CONTRACT_CASE("64 MiB all-reduce and 40 MiB broadcast", LargeBuffers)
CONTRACT_CASE("a killed rank makes the others fail within the timeout", KilledRankIsNamed)
CONTRACT_CASE("a hung rank makes the others time out", StoppedRankTimesOut)
CONTRACT_CASE("a rank that never joins is named", MissingRankIsNamed)
CONTRACT_CASE("shared memory, and its barrier, only between ranks of one machine",
              SharedMemoryOnlyOnOneMachine)

TEST_CASE("gloo: shared memory /dev/shm has no room for leaves the all-reduce's own",
          "[collective][gloo]") {
  RunScenario(Backend::kGloo, {2}, "shared-too-big",
              "no shared floats, all-reduce through shared memory");
}

TEST_CASE("gloo: a rank killed or stopped in a shared barrier fails the others naming it",
          "[collective][gloo]") {
  for (int size : {2, 3}) {
    INFO(size << " ranks");
    for (const auto& [output, took] :
         FailRank1(Backend::kGloo, size, SIGKILL, absl::Seconds(3), "shared-until-failure")) {
      INFO(output);
      CHECK(absl::StrContains(output, "error: UNAVAILABLE: barrier with rank"));
      if (size == 2) CHECK(absl::StrContains(output, "with rank 1 failed: connection closed"));
    }
    // With 3 ranks the other survivor may fail first because rank 0 gave up.
    bool timed_out = false;
    for (const auto& [output, took] :
         FailRank1(Backend::kGloo, size, SIGSTOP, absl::Seconds(3), "shared-until-failure")) {
      INFO(output);
      timed_out = timed_out || absl::StrContains(output, "barrier timed out after 3s waiting for rank 1");
      if (size == 2) CHECK(absl::StrContains(output, "barrier timed out after 3s waiting for rank 1"));
      CHECK(took >= absl::Seconds(3) * 0.8);
    }
    CHECK(timed_out);
  }
}

}  // namespace
}  // namespace cohort::trainer::collective
