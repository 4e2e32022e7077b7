// The factories' own errors, and the 1-rank world, in one process (no peers needed).

#include <vector>

#include <catch2/catch.hpp>

#if COHORT_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "worker/trainer/collective/nccl_collective.h"
#endif

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/support/temp_dir.h"
#include "worker/trainer/collective/file_store.h"
#include "worker/trainer/collective/gloo_collective.h"

namespace cohort::trainer::collective {
namespace {

using cohort::testing::TempDir;

std::unique_ptr<FileStore> OpenStore(const TempDir& dir) {
  absl::StatusOr<std::unique_ptr<FileStore>> store = FileStore::Open(dir.File("store"));
  REQUIRE(store.ok());
  return *std::move(store);
}

TEST_CASE("gloo: bad options are refused with the field named", "[collective][gloo]") {
  TempDir dir;
  auto store = OpenStore(dir);
  GlooOptions options;
  options.timeout = absl::Seconds(2);

  options.rank = 2;
  options.size = 2;
  absl::Status s = CreateGlooCollective(options, store.get()).status();
  CHECK(absl::IsInvalidArgument(s));
  CHECK(absl::StrContains(s.message(), "rank 2 is outside [0, 2)"));

  options.rank = 0;
  options.size = 1;
  options.hostname = "no-such-host.invalid";
  s = CreateGlooCollective(options, store.get()).status();
  CHECK(absl::IsInvalidArgument(s));
  CHECK(absl::StrContains(s.message(), "no-such-host.invalid"));

  options.hostname = "127.0.0.1";
  options.interface = "nosuchif0";
  s = CreateGlooCollective(options, store.get()).status();
  CHECK(absl::IsInvalidArgument(s));
  CHECK(absl::StrContains(s.message(), "nosuchif0"));

}

TEST_CASE("gloo: one rank is a world of its own, unusable after a bad call",
          "[collective][gloo]") {
  TempDir dir;
  auto store = OpenStore(dir);
  GlooOptions options;
  options.interface = "lo";
  absl::StatusOr<std::unique_ptr<Collective>> made = CreateGlooCollective(options, store.get());
  REQUIRE(made.ok());
  Collective& c = **made;
  CHECK(c.rank() == 0);
  CHECK(c.size() == 1);
  CHECK(c.device_kind() == DeviceKind::kCpu);

  std::vector<float> v(100000, 2.5f);
  CHECK(c.AllReduce(v.data(), v.size()).ok());
  CHECK(v == std::vector<float>(100000, 2.5f));
  CHECK(c.Broadcast(v.data(), 400, 0).ok());
  CHECK(c.Barrier().ok());

  absl::Status bad = c.Broadcast(v.data(), 400, 1);
  CHECK(absl::IsInvalidArgument(bad));
  CHECK(absl::StrContains(bad.message(), "broadcast root 1 is outside [0, 1)"));
  absl::Status after = c.StartAllReduce(v.data(), v.size())->Wait();
  CHECK(absl::IsFailedPrecondition(after));
  CHECK(absl::StrContains(after.message(), "unusable after an earlier error"));
  CHECK(absl::StrContains(after.message(), "broadcast root 1"));
}

#if COHORT_HAVE_NCCL
TEST_CASE("nccl: a CUDA device that is not there is refused", "[collective][nccl]") {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  TempDir dir;
  auto store = OpenStore(dir);
  NcclOptions options;
  options.device = count;  // one past the last device: none, on a machine without GPUs
  absl::Status s = CreateNcclCollective(options, store.get()).status();
  INFO(s.ToString());
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(absl::StrContains(s.message(), absl::StrCat("no CUDA device ", count)));
}
#endif

}  // namespace
}  // namespace cohort::trainer::collective
