#include "worker/trainer/cpu_kernels.h"

#include <cmath>
#include <algorithm>
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

COHORT_CPU_CLONES
void AddBiasRelu(float* values, const float* bias, int64_t rows, int64_t columns, bool relu) {
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict v = values + r * columns;
    if (bias != nullptr) {
      const float* __restrict b = bias;
      for (int64_t c = 0; c < columns; ++c) v[c] += b[c];
    }
    if (relu) {
      for (int64_t c = 0; c < columns; ++c) v[c] = v[c] < 0.0f ? 0.0f : v[c];
    }
  }
}

COHORT_CPU_CLONES
void ReluBackwardColumnSums(float* gradient, const float* output, int64_t rows, int64_t columns,
                            float* column_sums) {
  if (column_sums != nullptr) std::fill(column_sums, column_sums + columns, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict g = gradient + r * columns;
    if (output != nullptr) {
      const float* __restrict y = output + r * columns;
      for (int64_t c = 0; c < columns; ++c) g[c] = y[c] <= 0.0f ? 0.0f : g[c];
    }
    if (column_sums != nullptr) {
      float* __restrict s = column_sums;
      for (int64_t c = 0; c < columns; ++c) s[c] += g[c];
    }
  }
}

double SoftmaxCrossEntropy(const float* logits, int64_t rows, int64_t columns,
                           const int64_t* labels, const float* targets, float label_smoothing,
                           float scale, float* probabilities, float* gradient) {
  double total = 0;
  const float keep = 1.0f - label_smoothing, spread = label_smoothing / static_cast<float>(columns);
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * columns;
    float* g = gradient + r * columns;
    float top = z[0];
    for (int64_t c = 1; c < columns; ++c) top = std::max(top, z[c]);
    float sum = 0;
    for (int64_t c = 0; c < columns; ++c) {
      g[c] = std::exp(z[c] - top);
      sum += g[c];
    }
    const float log_sum = std::log(sum), inverse = 1.0f / sum;
    for (int64_t c = 0; c < columns; ++c) g[c] *= inverse;  // the softmax, for now
    if (probabilities != nullptr) std::copy(g, g + columns, probabilities + r * columns);
    if (labels != nullptr) {
      const int64_t label = labels[r];
      if (label < 0 || label >= columns) {
        total += std::nan("");
      } else {
        total -= static_cast<double>(z[label] - top - log_sum);
        g[label] -= 1.0f;
      }
      for (int64_t c = 0; c < columns; ++c) g[c] *= scale;
      continue;
    }
    // Soft targets: loss -sum(t * log p); gradient p * sum(t) - t.
    const float* t = targets + r * columns;
    float mass = 0;
    double loss = 0;
    for (int64_t c = 0; c < columns; ++c) {
      const float tc = t[c] * keep + spread;
      mass += tc;
      loss -= static_cast<double>(tc) * static_cast<double>(z[c] - top - log_sum);
    }
    total += loss;
    for (int64_t c = 0; c < columns; ++c) g[c] = (g[c] * mass - (t[c] * keep + spread)) * scale;
  }
  return total;
}

double SquaredError(const float* prediction, const float* targets, int64_t rows, int64_t columns,
                    float scale, float* gradient) {
  double total = 0;
  const float factor = 2.0f * scale / static_cast<float>(columns);
  for (int64_t r = 0; r < rows; ++r) {
    double row = 0;
    for (int64_t c = 0; c < columns; ++c) {
      const int64_t i = r * columns + c;
      const float d = prediction[i] - targets[i];
      row += static_cast<double>(d) * d;
      gradient[i] = d * factor;
    }
    total += row / static_cast<double>(columns);
  }
  return total;
}

}  // namespace cohort::trainer
