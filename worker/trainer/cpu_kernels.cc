#include "worker/trainer/cpu_kernels.h"

#include <cmath>
#include <cstddef>

// Compiled with -O3 -fno-math-errno -ffp-contract=off (CMakeLists.txt): the loops
// vectorize (sqrt included) and no multiply-add is fused.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define COHORT_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define COHORT_CPU_CLONES
#endif

namespace cohort::trainer {

COHORT_CPU_CLONES
bool AllFinite(std::span<const float> values) {
  // x - x is 0 for a finite x and NaN otherwise, and NaN equals nothing: a loop without
  // branches, which vectorizes.
  const float* __restrict x = values.data();
  int bad = 0;
  for (size_t i = 0; i < values.size(); ++i) bad |= !(x[i] - x[i] == 0.0f);
  return bad == 0;
}

COHORT_CPU_CLONES
void AdamUpdate(std::span<float> variable, std::span<const float> gradient, std::span<float> m,
                std::span<float> v, const AdamCoefficients& c) {
  float* __restrict var = variable.data();
  const float* __restrict g = gradient.data();
  float* __restrict mp = m.data();
  float* __restrict vp = v.data();
  const float b1 = c.one_minus_beta_1, b2 = c.one_minus_beta_2, alpha = c.alpha,
              eps = c.epsilon;
  for (size_t i = 0; i < variable.size(); ++i) {
    const float gi = g[i];
    const float mi = mp[i] + (gi - mp[i]) * b1;
    const float vi = vp[i] + (gi * gi - vp[i]) * b2;
    mp[i] = mi;
    vp[i] = vi;
    var[i] -= (mi * alpha) / (std::sqrt(vi) + eps);
  }
}

}  // namespace cohort::trainer
