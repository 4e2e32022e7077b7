// cpu_kernels' passes over flat buffers: the same bits on one thread and split across
// several, and the same bits as the formula written out one element at a time.

#include "worker/trainer/cpu_kernels.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

namespace cohort::trainer {
namespace {

struct AdamState {
  std::vector<float> variable, gradient, m, v;
};

AdamState RandomState(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  AdamState s;
  for (auto* buffer : {&s.variable, &s.gradient, &s.m, &s.v}) {
    buffer->resize(n);
    for (float& x : *buffer) x = normal(rng);
  }
  for (float& x : s.v) x = x * x;  // a second moment is not negative
  return s;
}

constexpr AdamCoefficients kAdam{.one_minus_beta_1 = 0.1f,
                                 .one_minus_beta_2 = 0.001f,
                                 .alpha = 1e-3f,
                                 .epsilon = 1e-7f};

void RunAdam(AdamState& s, int threads) {
  omp_set_num_threads(threads);
  AdamUpdate(s.variable, s.gradient, s.m, s.v, kAdam);
  omp_set_num_threads(1);
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("AdamUpdate computes Keras' formula, bit for bit, on any number of threads",
          "[cpu_kernels]") {
  // Long enough to be split (2^15 elements per thread at least), and not a multiple of a
  // cache line; and a short one that is not split.
  for (size_t n : {size_t{200003}, size_t{1000}}) {
    const AdamState start = RandomState(n, 7);
    AdamState reference = start;
    for (size_t i = 0; i < n; ++i) {
      float& m = reference.m[i];
      float& v = reference.v[i];
      const float g = reference.gradient[i];
      m = m + (g - m) * kAdam.one_minus_beta_1;
      v = v + (g * g - v) * kAdam.one_minus_beta_2;
      reference.variable[i] -= (m * kAdam.alpha) / (std::sqrt(v) + kAdam.epsilon);
    }
    for (int threads : {1, 2, 3}) {
      CAPTURE(n, threads);
      AdamState s = start;
      RunAdam(s, threads);
      CHECK(SameBits(s.variable, reference.variable));
      CHECK(SameBits(s.m, reference.m));
      CHECK(SameBits(s.v, reference.v));
    }
    // Buffers that start at every offset within a cache line: the slices' unaligned
    // heads and tails take the one-lane loop, the rest the wide (streaming) one.
    for (size_t offset = 1; offset < 16 && n > 16; offset += 3) {
      CAPTURE(n, offset);
      AdamState s = start;
      const size_t len = n - offset;
      omp_set_num_threads(2);
      AdamUpdate(std::span(s.variable).subspan(offset), std::span(s.gradient).subspan(offset),
                 std::span(s.m).subspan(offset), std::span(s.v).subspan(offset), kAdam);
      omp_set_num_threads(1);
      CHECK(std::memcmp(s.variable.data() + offset, reference.variable.data() + offset,
                        len * sizeof(float)) == 0);
      CHECK(std::memcmp(s.m.data() + offset, reference.m.data() + offset, len * sizeof(float)) == 0);
      CHECK(std::memcmp(s.v.data() + offset, reference.v.data() + offset, len * sizeof(float)) == 0);
      CHECK(std::memcmp(s.variable.data(), start.variable.data(), offset * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("AllFinite finds a NaN or infinity wherever it is, on any number of threads",
          "[cpu_kernels]") {
  const size_t n = 200003;
  std::vector<float> values(n, 1.5f);
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    CAPTURE(threads);
    CHECK(AllFinite(values));
    for (size_t at : {size_t{0}, n / 3, n / 2 + 1, n - 1}) {
      for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()}) {
        CAPTURE(at, bad);
        values[at] = bad;
        CHECK_FALSE(AllFinite(values));
        values[at] = 1.5f;
      }
    }
  }
  omp_set_num_threads(1);
}

TEST_CASE("the Dense and Add layers' passes give the formula's bits on any number of threads",
          "[cpu_kernels]") {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  // Small enough to stay on one thread, and large enough to be split.
  for (auto [rows, columns] : {std::pair<int64_t, int64_t>{7, 10}, {1024, 256}, {999, 130}}) {
    std::vector<float> start(rows * columns), output(rows * columns), bias(columns);
    for (float& x : start) x = normal(rng);
    for (float& x : output) x = normal(rng);
    for (float& x : bias) x = normal(rng);
    output[5] = std::numeric_limits<float>::quiet_NaN();  // stays NaN through the rectifier
    // The formulas, one element at a time.
    // The bias gradient: rows summed in blocks of 64 (each in row order), then the
    // blocks' sums in order.
    std::vector<float> activated = start, masked = start, sums(columns, 0.0f),
                       block_sums(columns, 0.0f);
    std::vector<float> added(rows * columns), rectified(rows * columns);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < columns; ++c) {
        const int64_t i = r * columns + c;
        added[i] = start[i] + output[i];
        rectified[i] = added[i] < 0.0f ? 0.0f : added[i];
        float& a = activated[r * columns + c];
        a = std::max(a + bias[c], 0.0f);
        float& g = masked[r * columns + c];
        if (output[r * columns + c] <= 0.0f) g = 0.0f;
        block_sums[c] += g;
      }
      if (r % 64 == 63 || r + 1 == rows) {
        for (int64_t c = 0; c < columns; ++c) sums[c] = r < 64 ? block_sums[c] : sums[c] + block_sums[c];
        std::fill(block_sums.begin(), block_sums.end(), 0.0f);
      }
    }
    for (int threads : {1, 2, 3}) {
      CAPTURE(rows, columns, threads);
      omp_set_num_threads(threads);
      std::vector<float> values = start, gradient = start, column_sums(columns, -1.0f);
      AddBiasRelu(values.data(), bias.data(), rows, columns, /*relu=*/true);
      ReluBackwardColumnSums(gradient.data(), output.data(), rows, columns, column_sums.data());
      std::vector<float> sum(rows * columns, -1.0f), in_place = start;
      AddRelu(start.data(), output.data(), sum.size(), /*relu=*/false, sum.data());
      AddRelu(in_place.data(), output.data(), sum.size(), /*relu=*/true, in_place.data());
      omp_set_num_threads(1);
      CHECK(SameBits(sum, added));
      CHECK(SameBits(in_place, rectified));
      CHECK(std::isnan(in_place[5]));
      CHECK(SameBits(values, activated));
      CHECK(SameBits(gradient, masked));
      CHECK(SameBits(column_sums, sums));
    }
  }
}

TEST_CASE("ParallelSlices covers every item once, in aligned slices, one per thread",
          "[cpu_kernels]") {
  for (int threads : {1, 2, 3}) {
    for (size_t n : {size_t{0}, size_t{5}, size_t{99}, size_t{100}, size_t{1001}}) {
      CAPTURE(threads, n);
      omp_set_num_threads(threads);
      std::vector<int> seen(n, 0);
      std::mutex mu;
      std::vector<std::pair<size_t, size_t>> slices;
      std::set<int> thread_numbers;
      ParallelSlices(n, /*align=*/8, /*min_items=*/50, [&](size_t begin, size_t end) {
        std::lock_guard<std::mutex> lock(mu);
        slices.emplace_back(begin, end);
        thread_numbers.insert(omp_get_thread_num());
        for (size_t i = begin; i < end; ++i) ++seen[i];
      });
      CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(n));
      for (auto [begin, end] : slices) {
        CHECK(begin < end);
        CHECK(begin % 8 == 0);
        CHECK((end % 8 == 0 || end == n));
      }
      // Below 2 * min_items, or on one thread, one slice on the calling thread.
      const size_t expected = n == 0 ? 0 : (n < 100 || threads == 1 ? 1 : threads);
      CHECK(slices.size() == expected);
      CHECK(thread_numbers.size() == expected);
    }
  }
  omp_set_num_threads(1);
}

}  // namespace
}  // namespace cohort::trainer
