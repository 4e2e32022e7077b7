#include "worker/trainer/step_stats.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#ifdef COHORT_HAVE_CUDA_RUNTIME
#include <cuda_runtime_api.h>
#endif

namespace cohort::trainer {

void StepStats::Add(const StepTiming& t) {
  ++steps_;
  sum_.step += t.step;
  sum_.data += t.data;
  sum_.all_reduce += t.all_reduce;
  sum_.all_reduce_wait += t.all_reduce_wait;
  sum_.all_reduce_bytes += t.all_reduce_bytes;
  sum_.rows += t.rows;
}

nlohmann::json StepStats::TakeWindow(absl::Duration elapsed) {
  double n = static_cast<double>(std::max<int64_t>(steps_, 1));
  double seconds = absl::ToDoubleSeconds(elapsed);
  nlohmann::json j = {
      {"steps", steps_},
      {"rows", sum_.rows},
      {"samples_per_second", seconds > 0 ? static_cast<double>(sum_.rows) / seconds : 0.0},
      {"step_seconds", absl::ToDoubleSeconds(sum_.step) / n},
      {"data_seconds", absl::ToDoubleSeconds(sum_.data) / n},
      {"all_reduce_seconds", absl::ToDoubleSeconds(sum_.all_reduce) / n},
      {"all_reduce_wait_seconds", absl::ToDoubleSeconds(sum_.all_reduce_wait) / n},
      {"all_reduce_bytes", sum_.all_reduce_bytes},
      {"rss_bytes", ResidentBytes()},
  };
  steps_ = 0;
  sum_ = StepTiming();
  return j;
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

int64_t GpuMemoryUsedBytes(int device) {
#ifdef COHORT_HAVE_CUDA_RUNTIME
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return 0;
  if (previous != device && cudaSetDevice(device) != cudaSuccess) return 0;
  size_t free = 0, total = 0;
  cudaError_t rc = cudaMemGetInfo(&free, &total);
  if (previous != device) cudaSetDevice(previous);
  return rc == cudaSuccess ? static_cast<int64_t>(total - free) : 0;
#else
  (void)device;
  return 0;
#endif
}

}  // namespace cohort::trainer
