#include "worker/trainer/cpu_threads.h"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <thread>

#include <torch/torch.h>

namespace cohort::trainer {

int CpuCores() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) return std::max(1, CPU_COUNT(&allowed));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int DefaultCpuThreads(int local_ranks) { return std::max(1, CpuCores() / std::max(1, local_ranks)); }

void FlushDenormalsToZero() { at::globalContext().setFlushDenormal(true); }

void SetCpuThreads(int threads, bool intra_op) {
  torch::set_num_threads(intra_op ? threads : 1);
  // Looked up, not linked: the BLAS is whichever library libblas.so.3 is at run time.
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(intra_op ? 1 : threads);
  }
}

}  // namespace cohort::trainer
