#include "worker/trainer/devices.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"

namespace cohort::trainer {
namespace {

TEST_CASE("TorchDescription names LibTorch and its device kind", "[trainer]") {
  std::string d = TorchDescription();
  CHECK(absl::StartsWith(d, "LibTorch "));
  CHECK((absl::EndsWith(d, "(CPU)") || absl::EndsWith(d, "(CUDA)")));
}

TEST_CASE("CudaDevices lists every GPU LibTorch sees, with names and memory", "[gpu]") {
  std::vector<GpuDevice> gpus = CudaDevices();
  if (gpus.empty()) {
    WARN("skipped: no GPU visible to LibTorch on this machine");
    return;
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    CHECK(gpus[i].index == static_cast<int>(i));
    CHECK_FALSE(gpus[i].name.empty());
    CHECK(gpus[i].memory_bytes > 0);
  }
}

}  // namespace
}  // namespace cohort::trainer
