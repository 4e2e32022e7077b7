#include "worker/trainer/devices.h"

#include <torch/cuda.h>
#include <torch/version.h>

#ifdef COHORT_HAVE_CUDA_RUNTIME
#include <cuda_runtime_api.h>
#endif

namespace cohort::trainer {

std::vector<GpuDevice> CudaDevices() {
  std::vector<GpuDevice> out;
  int count = static_cast<int>(torch::cuda::device_count());
  for (int i = 0; i < count; ++i) {
    GpuDevice d;
    d.index = i;
    d.name = "cuda:" + std::to_string(i);
#ifdef COHORT_HAVE_CUDA_RUNTIME
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) {
      d.name = prop.name;
      d.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    }
#endif
    out.push_back(d);
  }
  return out;
}

std::string TorchDescription() {
  std::string text = "LibTorch " TORCH_VERSION;
  text += torch::cuda::is_available() ? " (CUDA)" : " (CPU)";
  return text;
}

}  // namespace cohort::trainer
