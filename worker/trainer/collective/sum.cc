#include "worker/trainer/collective/sum.h"

namespace cohort::trainer::collective {

void AddInto(float* __restrict out, const float* __restrict in, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] += in[i];
}

}  // namespace cohort::trainer::collective
