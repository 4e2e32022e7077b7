#include "worker/trainer/cpu_threads.h"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <set>
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

std::string OpenBlasCore() {
  using CoreName = char* (*)();
  auto name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return name != nullptr && name() != nullptr ? name() : "";
}

std::optional<std::string> OpenBlasCoreTypeToSet() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return std::nullopt;
  // OpenBLAS' x86-64 cores whose kernels use neither AVX2 nor FMA.
  static const std::set<std::string> kWithoutAvx2 = {
      "Unknown",    "Katmai",    "Coppermine", "Northwood", "Prescott",      "Banias",
      "Atom",       "Core2",     "Penryn",     "Dunnington", "Nehalem",      "Athlon",
      "Opteron",    "Opteron_SSE3", "Opteron(SSE3)", "Barcelona", "Nano",  "Sandybridge",
      "Bobcat",     "Bulldozer", "Piledriver", "Steamroller", "Excavator"};
  if (!kWithoutAvx2.contains(OpenBlasCore())) return std::nullopt;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return std::nullopt;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  return avx512 ? "SkylakeX" : "Haswell";
}

}  // namespace cohort::trainer
