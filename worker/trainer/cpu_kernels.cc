#include "worker/trainer/cpu_kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <omp.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Compiled with -O3 -fno-math-errno -ffp-contract=off -fopenmp (CMakeLists.txt): the
// loops vectorize (sqrt included) and no multiply-add is fused.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define COHORT_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define COHORT_CPU_CLONES
#endif

namespace cohort::trainer {

namespace {

// Elementwise passes over the flat buffers are split into slices of whole cache lines.
// Each element is computed alone, so the split changes no bit. Below this many elements
// a slice is not worth a thread's start.
constexpr size_t kParallelMinElements = size_t{1} << 15;

template <typename SliceFn>
void ForEachSlice(size_t n, SliceFn&& slice) {
  ParallelSlices(n, 64 / sizeof(float), kParallelMinElements, slice);
}

COHORT_CPU_CLONES
bool SliceFinite(const float* __restrict x, size_t n) {
  // x - x is 0 for a finite x and NaN otherwise, and NaN equals nothing: a loop without
  // branches, which vectorizes.
  int bad = 0;
  for (size_t i = 0; i < n; ++i) bad |= !(x[i] - x[i] == 0.0f);
  return bad == 0;
}

COHORT_CPU_CLONES
void AdamSlice(float* __restrict var, const float* __restrict g, float* __restrict mp,
               float* __restrict vp, size_t n, const AdamCoefficients& c) {
  const float b1 = c.one_minus_beta_1, b2 = c.one_minus_beta_2, alpha = c.alpha,
              eps = c.epsilon;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = mp[i] + (gi - mp[i]) * b1;
    const float vi = vp[i] + (gi * gi - vp[i]) * b2;
    mp[i] = mi;
    vp[i] = vi;
    var[i] -= (mi * alpha) / (std::sqrt(vi) + eps);
  }
}

#if defined(__x86_64__)
// AdamSlice writing the variable with streaming (non-temporal) stores, AVX-512 only: the
// same operations in the same order on 16 lanes, so the same bits. Why: when a rank
// computes on several threads, every thread's matrix products read all of a layer's
// weights, so each weight's cache line sits in every core's cache, and an ordinary
// store must first take the line from the other cores one line at a time, which the
// hardware does not prefetch. A streaming store does not wait for it. mlp batch 128 on 2
// threads: Adam 131-138 -> 65-67 us, the step 600 -> 520 us (the next forward reads the
// weights from memory no slower than from the other core). On one thread the weights
// are the thread's own and a streaming store only sends them out of the cache (step
// 804-831 -> 878-918 us), so one thread keeps AdamSlice.
__attribute__((target("avx512f")))
void AdamSliceStreaming(float* __restrict var, const float* __restrict g, float* __restrict mp,
                        float* __restrict vp, size_t n, const AdamCoefficients& c) {
  size_t head = 0;  // streaming stores need 64-byte aligned addresses
  while (head < n && reinterpret_cast<uintptr_t>(var + head) % 64 != 0) ++head;
  AdamSlice(var, g, mp, vp, head, c);
  const __m512 b1 = _mm512_set1_ps(c.one_minus_beta_1), b2 = _mm512_set1_ps(c.one_minus_beta_2),
               alpha = _mm512_set1_ps(c.alpha), eps = _mm512_set1_ps(c.epsilon);
  size_t i = head;
  for (; i + 16 <= n; i += 16) {
    const __m512 gi = _mm512_loadu_ps(g + i), m0 = _mm512_loadu_ps(mp + i),
                 v0 = _mm512_loadu_ps(vp + i);
    const __m512 mi = _mm512_add_ps(m0, _mm512_mul_ps(_mm512_sub_ps(gi, m0), b1));
    const __m512 vi =
        _mm512_add_ps(v0, _mm512_mul_ps(_mm512_sub_ps(_mm512_mul_ps(gi, gi), v0), b2));
    _mm512_storeu_ps(mp + i, mi);
    _mm512_storeu_ps(vp + i, vi);
    // (maskz: GCC 12 warns of _mm512_sqrt_ps' undefined pass-through operand)
    const __m512 root = _mm512_maskz_sqrt_ps(0xffff, vi);
    const __m512 step = _mm512_div_ps(_mm512_mul_ps(mi, alpha), _mm512_add_ps(root, eps));
    _mm512_stream_ps(var + i, _mm512_sub_ps(_mm512_load_ps(var + i), step));
  }
  _mm_sfence();  // the streamed stores visible before the thread leaves the slice
  AdamSlice(var + i, g + i, mp + i, vp + i, n - i, c);
}

bool HasStreamingAdam() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}
#else
bool HasStreamingAdam() { return false; }
void AdamSliceStreaming(float* var, const float* g, float* mp, float* vp, size_t n,
                        const AdamCoefficients& c) {
  AdamSlice(var, g, mp, vp, n, c);
}
#endif

COHORT_CPU_CLONES
void Bfloat16Slice(const float* __restrict x, uint16_t* __restrict out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], sizeof(u));
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    out[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : rounded);
  }
}

}  // namespace

void ParallelSlices(size_t n, size_t align, size_t min_items,
                    const std::function<void(size_t, size_t)>& slice) {
  const int threads = n >= 2 * min_items && !omp_in_parallel() ? omp_get_max_threads() : 1;
  if (threads <= 1) {
    if (n > 0) slice(size_t{0}, n);
    return;
  }
  const size_t per = ((n + threads - 1) / threads + align - 1) / align * align;
#pragma omp parallel num_threads(threads)
  {
    const size_t begin = std::min(n, per * static_cast<size_t>(omp_get_thread_num()));
    const size_t end = std::min(n, begin + per);
    if (begin < end) slice(begin, end);
  }
}

void ToBfloat16(std::span<const float> values, uint16_t* out) {
  ForEachSlice(values.size(), [&](size_t begin, size_t end) {
    Bfloat16Slice(values.data() + begin, out + begin, end - begin);
  });
}

bool AllFinite(std::span<const float> values) {
  std::atomic<bool> finite{true};
  ForEachSlice(values.size(), [&](size_t begin, size_t end) {
    if (!SliceFinite(values.data() + begin, end - begin)) finite.store(false);
  });
  return finite.load();
}

void AdamUpdate(std::span<float> variable, std::span<const float> gradient, std::span<float> m,
                std::span<float> v, const AdamCoefficients& c) {
  ForEachSlice(variable.size(), [&](size_t begin, size_t end) {
    // Split across threads, the weights' lines are in every core's cache (above).
    auto* slice = HasStreamingAdam() && omp_get_num_threads() > 1 ? AdamSliceStreaming : AdamSlice;
    slice(variable.data() + begin, gradient.data() + begin, m.data() + begin,
          v.data() + begin, end - begin, c);
  });
}

namespace {

COHORT_CPU_CLONES
void AddBiasReluRows(float* values, const float* bias, int64_t rows, int64_t columns, bool relu) {
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

}  // namespace

void AddBiasRelu(float* values, const float* bias, int64_t rows, int64_t columns, bool relu) {
  // Rows enough for a slice to be worth a thread.
  const size_t min_rows = std::max<size_t>(1, kParallelMinElements / std::max<int64_t>(1, columns));
  ParallelSlices(rows, 1, min_rows, [&](size_t begin, size_t end) {
    AddBiasReluRows(values + begin * columns, bias, end - begin, columns, relu);
  });
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

namespace {

int64_t Argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t c = 1; c < n && !std::isnan(v[best]); ++c) {
    if (v[c] > v[best] || std::isnan(v[c])) best = c;
  }
  return best;
}

}  // namespace

int64_t ArgmaxMatches(const float* values, int64_t rows, int64_t columns, const int64_t* labels,
                      const float* targets) {
  int64_t matches = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t want = labels != nullptr ? labels[r] : Argmax(targets + r * columns, columns);
    matches += Argmax(values + r * columns, columns) == want;
  }
  return matches;
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
