// cpu_kernels' passes over flat buffers: the same bits on one thread and split across
// several, and the same bits as the formula written out one element at a time.

#include "worker/trainer/cpu_kernels.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
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

}  // namespace
}  // namespace cohort::trainer
