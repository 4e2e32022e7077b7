#pragma once

// The accelerators this process can train on, as the agent advertises them.
//
// LibTorch is the authority: a CPU-only LibTorch reports no GPUs even on a GPU machine,
// since it could not train there. Names and memory come from the CUDA runtime when the
// build has it. Torch-free header: the agent includes it without LibTorch's headers.

#include <cstdint>
#include <string>
#include <vector>

namespace cohort::trainer {

struct GpuDevice {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;
};

std::vector<GpuDevice> CudaDevices();

// "LibTorch 1.13.0 (CPU)" / "LibTorch 2.11.0 (CUDA 13.0)": for logs and `version`.
std::string TorchDescription();

}  // namespace cohort::trainer
