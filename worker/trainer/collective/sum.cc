#include "worker/trainer/collective/sum.h"

namespace cohort::trainer::collective {

void AddInto(float* __restrict out, const float* __restrict in, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] += in[i];
}

void SumTo(float* __restrict out, float* also, const float* a, const float* b, size_t n) {
  // `also` may be `a` or `b`: no element depends on another, which ivdep tells the
  // vectorizer (it would otherwise test for overlap and run the one-lane loop).
  if (also == nullptr) {
#pragma GCC ivdep
    for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    return;
  }
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) {
    const float sum = a[i] + b[i];
    out[i] = sum;
    also[i] = sum;
  }
}

}  // namespace cohort::trainer::collective
