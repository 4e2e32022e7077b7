#include "worker/trainer/cpu_kernels.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

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

// Rows of `row_work` elements' work enough for a slice to be worth a thread.
size_t MinRows(int64_t row_work) {
  return std::max<size_t>(1, kParallelMinElements / static_cast<size_t>(std::max<int64_t>(1, row_work)));
}

// row(n, r, index) for every row r of every sample n of a (samples, rows, ...) block,
// index = n * rows + r, split by rows across the OpenMP threads as ParallelSlices does.
template <typename RowFn>
void ParallelRows(int64_t samples, int64_t rows, int64_t row_work, RowFn&& row) {
  ParallelSlices(static_cast<size_t>(samples * rows), 1, MinRows(row_work),
                 [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const int64_t index = static_cast<int64_t>(i);
      row(index / rows, index % rows, index);
    }
  });
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
                std::span<float> v, const AdamCoefficients& c, bool variables_shared) {
  ForEachSlice(variable.size(), [&](size_t begin, size_t end) {
    // Split across threads, the weights' lines are in every core's cache (above).
    auto* slice = HasStreamingAdam() && (variables_shared || omp_get_num_threads() > 1)
                      ? AdamSliceStreaming
                      : AdamSlice;
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
  ParallelSlices(rows, 1, MinRows(columns), [&](size_t begin, size_t end) {
    AddBiasReluRows(values + begin * columns, bias, end - begin, columns, relu);
  });
}

namespace {

COHORT_CPU_CLONES
void AddReluSlice(const float* a, const float* b, size_t n, bool relu, float* sum) {
  if (relu) {
    for (size_t i = 0; i < n; ++i) {
      const float v = a[i] + b[i];
      sum[i] = v < 0.0f ? 0.0f : v;
    }
  } else {
    for (size_t i = 0; i < n; ++i) sum[i] = a[i] + b[i];
  }
}

}  // namespace

void AddRelu(const float* a, const float* b, size_t count, bool relu, float* sum) {
  ForEachSlice(count, [&](size_t begin, size_t end) {
    AddReluSlice(a + begin, b + begin, end - begin, relu, sum + begin);
  });
}

namespace {

// ReluBackwardColumnSums sums rows in blocks of this many: each block's column sums in
// row order, then the blocks' sums in block order, so the bits do not depend on the
// number of threads.
constexpr int64_t kColumnSumRows = 64;

COHORT_CPU_CLONES
void ReluBackwardColumnSumsBlock(float* gradient, const float* output, int64_t rows,
                                 int64_t columns, float* column_sums) {
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

COHORT_CPU_CLONES
void AddColumns(float* __restrict sum, const float* __restrict add, int64_t columns) {
  for (int64_t c = 0; c < columns; ++c) sum[c] += add[c];
}

}  // namespace

void ReluBackwardColumnSums(float* gradient, const float* output, int64_t rows, int64_t columns,
                            float* column_sums) {
  const int64_t blocks = (rows + kColumnSumRows - 1) / kColumnSumRows;
  if (blocks <= 1) {
    ReluBackwardColumnSumsBlock(gradient, output, rows, columns, column_sums);
    return;
  }
  // The blocks' sums; the calling thread's own buffer, so a step allocates nothing.
  // (Named through `sums` in the slices: inside them `partial` would be each OpenMP
  // thread's own.)
  thread_local std::vector<float> partial;
  float* sums = nullptr;
  if (column_sums != nullptr) {
    partial.resize(static_cast<size_t>(blocks * columns));
    sums = partial.data();
  }
  ParallelSlices(static_cast<size_t>(blocks), 1, MinRows(kColumnSumRows * columns),
                 [&](size_t begin, size_t end) {
    for (size_t b = begin; b < end; ++b) {
      const int64_t first = static_cast<int64_t>(b) * kColumnSumRows;
      ReluBackwardColumnSumsBlock(
          gradient + first * columns, output != nullptr ? output + first * columns : nullptr,
          std::min(kColumnSumRows, rows - first), columns,
          sums != nullptr ? sums + static_cast<int64_t>(b) * columns : nullptr);
    }
  });
  if (column_sums == nullptr) return;
  std::copy(sums, sums + columns, column_sums);
  for (int64_t b = 1; b < blocks; ++b) AddColumns(column_sums, sums + b * columns, columns);
}

namespace {

// Channels are taken this many at a time, so a window's running maxima and positions
// stay in registers.
constexpr int64_t kPoolLanes = 64;

// The outputs of row `oh` of sample `n`.
COHORT_CPU_CLONES
void MaxPoolRow(const float* in, const MaxPool2DShape& s, bool relu, int64_t n, int64_t oh,
                float* out, uint8_t* which) {
  const int64_t channels = s.channels;
  const int64_t h0 = oh * s.stride_h - s.pad_top;
  const int64_t h_begin = std::max<int64_t>(h0, 0), h_end = std::min(h0 + s.pool_h, s.height);
  for (int64_t ow = 0; ow < s.out_width; ++ow) {
    const int64_t w0 = ow * s.stride_w - s.pad_left;
    const int64_t w_begin = std::max<int64_t>(w0, 0), w_end = std::min(w0 + s.pool_w, s.width);
    float* o = out + ow * channels;
    uint8_t* at_out = which + ow * channels;
    for (int64_t c0 = 0; c0 < channels; c0 += kPoolLanes) {
      const int64_t lanes = std::min(kPoolLanes, channels - c0);
      float best[kPoolLanes], at[kPoolLanes];
      const float first = static_cast<float>((h_begin - h0) * s.pool_w + (w_begin - w0));
      for (int64_t l = 0; l < lanes; ++l) {
        best[l] = -std::numeric_limits<float>::infinity();
        at[l] = first;
      }
      for (int64_t ih = h_begin; ih < h_end; ++ih) {
        for (int64_t iw = w_begin; iw < w_end; ++iw) {
          const float* __restrict v = in + ((n * s.height + ih) * s.width + iw) * channels + c0;
          const float position = static_cast<float>((ih - h0) * s.pool_w + (iw - w0));
          for (int64_t l = 0; l < lanes; ++l) {
            const bool take = (v[l] > best[l]) | (v[l] != v[l]);  // no branch: vectorizes
            best[l] = take ? v[l] : best[l];
            at[l] = take ? position : at[l];
          }
        }
      }
      for (int64_t l = 0; l < lanes; ++l) {
        const float m = best[l];
        const bool passes = !relu | (m > 0.0f) | (m != m);
        o[c0 + l] = passes ? m : 0.0f;
        at_out[c0 + l] = passes ? static_cast<uint8_t>(at[l]) : kNoGradient;
      }
    }
  }
}

// Input row `ih` of sample `n`, where windows do not overlap: each input position is in
// one window at most, so each element is written once.
COHORT_CPU_CLONES
void MaxPoolBackwardRow(const float* grad_out, const uint8_t* which, const MaxPool2DShape& s,
                        int64_t n, int64_t ih, float* grad_in) {
  const int64_t channels = s.channels;
  const int64_t oh = (ih + s.pad_top) / s.stride_h, kh = ih + s.pad_top - oh * s.stride_h;
  if (oh >= s.out_height || kh >= s.pool_h) {
    std::fill(grad_in, grad_in + s.width * channels, 0.0f);
    return;
  }
  for (int64_t iw = 0; iw < s.width; ++iw) {
    float* __restrict g = grad_in + iw * channels;
    const int64_t ow = (iw + s.pad_left) / s.stride_w, kw = iw + s.pad_left - ow * s.stride_w;
    if (ow >= s.out_width || kw >= s.pool_w) {
      std::fill(g, g + channels, 0.0f);
      continue;
    }
    const int32_t position = static_cast<int32_t>(kh * s.pool_w + kw);
    const int64_t o = ((n * s.out_height + oh) * s.out_width + ow) * channels;
    const float* __restrict go = grad_out + o;
    const uint8_t* __restrict at = which + o;
    // Selected by masking the bits (0 bits are +0): no branch, so the loop vectorizes.
    for (int64_t c = 0; c < channels; ++c) {
      const uint32_t mask = -static_cast<uint32_t>(static_cast<int32_t>(at[c]) == position);
      g[c] = std::bit_cast<float>(std::bit_cast<uint32_t>(0.0f + go[c]) & mask);
    }
  }
}

// Sample `n`, where windows overlap: zeros, then each gradient added at its position,
// in output order.
void MaxPoolBackwardSample(const float* grad_out, const uint8_t* which, const MaxPool2DShape& s,
                           int64_t n, float* grad_in) {
  const int64_t channels = s.channels;
  std::fill(grad_in, grad_in + s.height * s.width * channels, 0.0f);
  for (int64_t oh = 0; oh < s.out_height; ++oh) {
    for (int64_t ow = 0; ow < s.out_width; ++ow) {
      const int64_t o = ((n * s.out_height + oh) * s.out_width + ow) * channels;
      const int64_t h0 = oh * s.stride_h - s.pad_top, w0 = ow * s.stride_w - s.pad_left;
      for (int64_t c = 0; c < channels; ++c) {
        const uint8_t position = which[o + c];
        if (position == kNoGradient) continue;
        const int64_t ih = h0 + position / s.pool_w, iw = w0 + position % s.pool_w;
        grad_in[(ih * s.width + iw) * channels + c] += grad_out[o + c];
      }
    }
  }
}

}  // namespace

bool MaxPool2DSupported(const MaxPool2DShape& s) {
  return s.batch > 0 && s.height > 0 && s.width > 0 && s.channels > 0 && s.pool_h > 0 &&
         s.pool_w > 0 && s.pool_h * s.pool_w < kNoGradient && s.stride_h > 0 && s.stride_w > 0 &&
         s.pad_top >= 0 && s.pad_left >= 0 && s.pad_top < s.pool_h && s.pad_left < s.pool_w &&
         s.out_height > 0 && s.out_width > 0 &&
         (s.out_height - 1) * s.stride_h - s.pad_top < s.height &&
         (s.out_width - 1) * s.stride_w - s.pad_left < s.width;
}

void MaxPool2DForward(const float* in, const MaxPool2DShape& s, bool relu, float* out,
                      uint8_t* which) {
  const int64_t row = s.out_width * s.channels;
  ParallelRows(s.batch, s.out_height, row * s.pool_h * s.pool_w,
               [&](int64_t n, int64_t oh, int64_t index) {
    MaxPoolRow(in, s, relu, n, oh, out + index * row, which + index * row);
  });
}

void MaxPool2DBackward(const float* grad_out, const uint8_t* which, const MaxPool2DShape& s,
                       float* grad_in) {
  const int64_t row = s.width * s.channels;
  if (s.stride_h >= s.pool_h && s.stride_w >= s.pool_w) {
    ParallelRows(s.batch, s.height, row, [&](int64_t n, int64_t ih, int64_t index) {
      MaxPoolBackwardRow(grad_out, which, s, n, ih, grad_in + index * row);
    });
    return;
  }
  ParallelSlices(static_cast<size_t>(s.batch), 1, MinRows(row * s.height),
                 [&](size_t begin, size_t end) {
    for (size_t n = begin; n < end; ++n) {
      MaxPoolBackwardSample(grad_out, which, s, static_cast<int64_t>(n),
                            grad_in + n * s.height * row);
    }
  });
}

namespace {

// The helpers below are always inlined into the clones, so the ABI of a 64-byte vector
// passed or returned (which GCC warns differs without AVX-512) is never used.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// 16 floats: one AVX-512 register (two AVX2 ones, four SSE ones in the other clones).
typedef float Floats16 __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;

inline __attribute__((always_inline)) Floats16 Load16(const float* p) {
  Floats16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline __attribute__((always_inline)) void Store16(float* p, const Floats16& v) {
  std::memcpy(p, &v, sizeof(v));
}

// Where each tap (kh, kw, in), in that order, reads: its offset from an output's first
// input value.
std::vector<int64_t> TapOffsets(const Conv2DShape& s) {
  std::vector<int64_t> offsets;
  for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
    for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
      for (int64_t ci = 0; ci < s.in_channels; ++ci) {
        offsets.push_back((kh * s.dilation_h * s.width + kw * s.dilation_w) * s.in_channels + ci);
      }
    }
  }
  return offsets;
}

// kBlock outputs, the first reading from `x` (its first input value) and written to
// `out`, each `step` input values after the one before; 16 channels from `co`, their
// sums in registers, the taps (offsets[t]: see TapOffsets) in order.
template <int kBlock>
inline __attribute__((always_inline)) void SmallConvBlock(const float* x, const float* kernel,
                                                          const float* bias,
                                                          const int64_t* offsets, int64_t taps,
                                                          int64_t step, int64_t cout, int64_t co,
                                                          float* out) {
  Floats16 sum[kBlock] = {};
  for (int64_t t = 0; t < taps; ++t) {
    const Floats16 kv = Load16(kernel + t * cout + co);
    const float* xt = x + offsets[t];
    for (int b = 0; b < kBlock; ++b) sum[b] += xt[b * step] * kv;
  }
  const Floats16 add = bias != nullptr ? Load16(bias + co) : Floats16{};
  for (int b = 0; b < kBlock; ++b) Store16(out + b * cout + co, sum[b] + add);
}

// Outputs of row `oh` of sample `n`, 8 at a time.
COHORT_CPU_CLONES
void SmallConvRow(const float* in, const float* kernel, const float* bias, const Conv2DShape& s,
                  const int64_t* offsets, int64_t n, int64_t oh, float* out) {
  constexpr int kBlock = 8;
  const int64_t cin = s.in_channels, cout = s.out_channels;
  const int64_t taps = s.kernel_h * s.kernel_w * cin;
  const int64_t step = s.stride_w * cin;  // from one output's input to the next's
  const float* row = in + (n * s.height + oh * s.stride_h) * s.width * cin;
  int64_t ow0 = 0;
  for (; ow0 + kBlock <= s.out_width; ow0 += kBlock) {
    for (int64_t co = 0; co < cout; co += kLanes) {
      SmallConvBlock<kBlock>(row + ow0 * step, kernel, bias, offsets, taps, step, cout, co,
                             out + ow0 * cout);
    }
  }
  for (; ow0 < s.out_width; ++ow0) {
    for (int64_t co = 0; co < cout; co += kLanes) {
      SmallConvBlock<1>(row + ow0 * step, kernel, bias, offsets, taps, step, cout, co,
                        out + ow0 * cout);
    }
  }
}

// kTaps taps' gradients (their offsets into a pixel's input in `offsets`), 16 channels
// from `co`, summed over one sample's outputs in order, in registers, into
// kernel_grad + t * cout (tap t of the group); with kBias, also the output gradients
// themselves (the bias' gradient), in the same order. `in` and `grad_out`: the sample's
// input and output gradient.
template <int kTaps, bool kBias>
inline __attribute__((always_inline)) void SmallConvTapGradients(
    const float* in, const float* grad_out, const Conv2DShape& s, int64_t co,
    const int64_t* offsets, float* kernel_grad, float* bias_grad) {
  const int64_t cin = s.in_channels, cout = s.out_channels;
  Floats16 sum[kTaps] = {}, bias_sum = {};
  for (int64_t oh = 0; oh < s.out_height; ++oh) {
    const float* g = grad_out + oh * s.out_width * cout + co;
    const float* x = in + oh * s.stride_h * s.width * cin;
    for (int64_t ow = 0; ow < s.out_width; ++ow) {
      const Floats16 gv = Load16(g + ow * cout);
      const float* px = x + ow * s.stride_w * cin;
      for (int t = 0; t < kTaps; ++t) sum[t] += px[offsets[t]] * gv;
      if constexpr (kBias) bias_sum += gv;
    }
  }
  for (int t = 0; t < kTaps; ++t) Store16(kernel_grad + t * cout, sum[t]);
  if constexpr (kBias) Store16(bias_grad, bias_sum);
}

// The same for `taps` taps (1 to 12) of the group, chosen at run time.
template <bool kBias>
inline __attribute__((always_inline)) void SmallConvTapGroup(
    int64_t taps, const float* in, const float* grad_out, const Conv2DShape& s, int64_t co,
    const int64_t* offsets, float* kernel_grad, float* bias_grad) {
  switch (taps) {
#define COHORT_TAP_GROUP(n) \
    case n: return SmallConvTapGradients<n, kBias>(in, grad_out, s, co, offsets, kernel_grad, bias_grad);
    COHORT_TAP_GROUP(1) COHORT_TAP_GROUP(2) COHORT_TAP_GROUP(3) COHORT_TAP_GROUP(4)
    COHORT_TAP_GROUP(5) COHORT_TAP_GROUP(6) COHORT_TAP_GROUP(7) COHORT_TAP_GROUP(8)
    COHORT_TAP_GROUP(9) COHORT_TAP_GROUP(10) COHORT_TAP_GROUP(11) COHORT_TAP_GROUP(12)
#undef COHORT_TAP_GROUP
  }
}

// One sample's share of the parameter gradients (`in`, `grad_out`: its input and output
// gradient), into `kernel_grad` and `bias_grad`. offsets[t]: where tap t (kh, kw, in)
// reads, from an output's first input value.
COHORT_CPU_CLONES
void SmallConvSampleGradients(const float* in, const float* grad_out, const Conv2DShape& s,
                              const int64_t* offsets, float* kernel_grad, float* bias_grad) {
  // Taps go in as few passes over the output gradient as 12 registers of sums allow,
  // as even as can be (3x3 on one channel: one pass of 9); the first also sums the
  // bias' gradient.
  constexpr int64_t kMaxGroup = 12;
  const int64_t cout = s.out_channels;
  const int64_t taps = s.kernel_h * s.kernel_w * s.in_channels;
  for (int64_t co = 0; co < cout; co += kLanes) {
    for (int64_t t = 0; t < taps;) {
      const int64_t passes = (taps - t + kMaxGroup - 1) / kMaxGroup;
      const int64_t group = (taps - t + passes - 1) / passes;
      float* k = kernel_grad + t * cout + co;
      if (t == 0) {
        SmallConvTapGroup<true>(group, in, grad_out, s, co, offsets, k, bias_grad + co);
      } else {
        SmallConvTapGroup<false>(group, in, grad_out, s, co, offsets + t, k, nullptr);
      }
      t += group;
    }
  }
}

#pragma GCC diagnostic pop

}  // namespace

bool SmallConv2DSupported(const Conv2DShape& s) {
  return s.batch > 0 && s.height > 0 && s.width > 0 && s.in_channels >= 1 &&
         s.in_channels <= 4 && s.out_channels > 0 && s.out_channels % kLanes == 0 &&
         s.kernel_h > 0 && s.kernel_w > 0 && s.stride_h > 0 && s.stride_w > 0 &&
         s.dilation_h > 0 && s.dilation_w > 0 && s.out_height > 0 && s.out_width > 0 &&
         (s.out_height - 1) * s.stride_h + (s.kernel_h - 1) * s.dilation_h < s.height &&
         (s.out_width - 1) * s.stride_w + (s.kernel_w - 1) * s.dilation_w < s.width;
}

void SmallConv2DForward(const float* in, const float* kernel, const float* bias,
                        const Conv2DShape& s, float* out) {
  const int64_t row = s.out_width * s.out_channels;
  const int64_t row_work = row * s.kernel_h * s.kernel_w * s.in_channels;
  const std::vector<int64_t> offsets = TapOffsets(s);
  ParallelRows(s.batch, s.out_height, row_work, [&](int64_t n, int64_t oh, int64_t index) {
    SmallConvRow(in, kernel, bias, s, offsets.data(), n, oh, out + index * row);
  });
}

namespace {

// The parameter gradients of SmallConv2D: sample_grad(n, scratch) gives sample n's
// output gradient, either in place or written to `scratch` (scratch_size floats, one
// buffer per thread). Each sample's share is summed alone, then the shares in sample
// order, so the bits do not depend on the threads.
template <typename SampleGradFn>
void SmallConvGradients(const float* in, const Conv2DShape& s, size_t scratch_size,
                        SampleGradFn&& sample_grad, float* kernel_grad, float* bias_grad) {
  const size_t kernel_size = static_cast<size_t>(s.kernel_h * s.kernel_w * s.in_channels * s.out_channels);
  const size_t per_sample = kernel_size + static_cast<size_t>(s.out_channels);
  std::vector<float> partial(static_cast<size_t>(s.batch) * per_sample);
  const std::vector<int64_t> offsets = TapOffsets(s);
  const int64_t sample_work = s.out_height * s.out_width * static_cast<int64_t>(kernel_size);
  const int64_t sample_in = s.height * s.width * s.in_channels;
  ParallelSlices(static_cast<size_t>(s.batch), 1, MinRows(sample_work), [&](size_t begin, size_t end) {
    std::vector<float> scratch(scratch_size);
    for (size_t n = begin; n < end; ++n) {
      float* p = partial.data() + n * per_sample;
      const float* grad_out = sample_grad(static_cast<int64_t>(n), scratch.data());
      SmallConvSampleGradients(in + static_cast<int64_t>(n) * sample_in, grad_out, s,
                               offsets.data(), p, p + kernel_size);
    }
  });
  std::fill(kernel_grad, kernel_grad + kernel_size, 0.0f);
  if (bias_grad != nullptr) std::fill(bias_grad, bias_grad + s.out_channels, 0.0f);
  for (int64_t n = 0; n < s.batch; ++n) {
    const float* p = partial.data() + static_cast<size_t>(n) * per_sample;
    for (size_t i = 0; i < kernel_size; ++i) kernel_grad[i] += p[i];
    if (bias_grad != nullptr) {
      for (int64_t c = 0; c < s.out_channels; ++c) bias_grad[c] += p[kernel_size + c];
    }
  }
}

}  // namespace

void SmallConv2DParameterGradients(const float* in, const float* grad_out, const Conv2DShape& s,
                                   float* kernel_grad, float* bias_grad) {
  const int64_t sample_out = s.out_height * s.out_width * s.out_channels;
  SmallConvGradients(in, s, 0, [&](int64_t n, float*) { return grad_out + n * sample_out; },
                     kernel_grad, bias_grad);
}

bool SmallConv2DMaxPoolSupported(const Conv2DShape& conv, const MaxPool2DShape& pool) {
  return SmallConv2DSupported(conv) && MaxPool2DSupported(pool) && pool.batch == conv.batch &&
         pool.height == conv.out_height && pool.width == conv.out_width &&
         pool.channels == conv.out_channels && pool.stride_h >= pool.pool_h &&
         pool.stride_w >= pool.pool_w;
}

void SmallConv2DMaxPoolForward(const float* in, const float* kernel, const float* bias,
                               const Conv2DShape& conv, const MaxPool2DShape& pool, bool relu,
                               float* out, uint8_t* which) {
  const int64_t conv_row = conv.out_width * conv.out_channels;
  const int64_t row = pool.out_width * pool.channels;
  const int64_t row_work = conv_row * pool.pool_h * conv.kernel_h * conv.kernel_w * conv.in_channels;
  const std::vector<int64_t> offsets = TapOffsets(conv);
  ParallelSlices(static_cast<size_t>(pool.batch * pool.out_height), 1, MinRows(row_work),
                 [&](size_t begin, size_t end) {
    std::vector<float> rows(static_cast<size_t>(pool.pool_h * conv_row));
    for (size_t i = begin; i < end; ++i) {
      const int64_t index = static_cast<int64_t>(i);
      const int64_t n = index / pool.out_height, oh = index % pool.out_height;
      // The window's rows of the convolution's output, clipped to it; then the pooling
      // of them alone, as one output row of a one-sample block that starts at the first.
      const int64_t h0 = oh * pool.stride_h - pool.pad_top;
      const int64_t h_begin = std::max<int64_t>(h0, 0), h_end = std::min(h0 + pool.pool_h, pool.height);
      for (int64_t ih = h_begin; ih < h_end; ++ih) {
        SmallConvRow(in, kernel, bias, conv, offsets.data(), n, ih,
                     rows.data() + (ih - h_begin) * conv_row);
      }
      MaxPool2DShape window = pool;
      window.batch = 1;
      window.height = h_end - h_begin;
      window.pad_top = h_begin - h0;
      window.out_height = 1;
      MaxPoolRow(rows.data(), window, relu, 0, 0, out + index * row, which + index * row);
    }
  });
}

void SmallConv2DMaxPoolParameterGradients(const float* in, const float* grad_out,
                                          const uint8_t* which, const Conv2DShape& conv,
                                          const MaxPool2DShape& pool, float* kernel_grad,
                                          float* bias_grad) {
  const int64_t conv_row = conv.out_width * conv.out_channels;
  auto sample_grad = [&](int64_t n, float* scratch) -> const float* {
    for (int64_t ih = 0; ih < pool.height; ++ih) {
      MaxPoolBackwardRow(grad_out, which, pool, n, ih, scratch + ih * conv_row);
    }
    return scratch;
  };
  SmallConvGradients(in, conv, static_cast<size_t>(conv.out_height * conv_row), sample_grad,
                     kernel_grad, bias_grad);
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
