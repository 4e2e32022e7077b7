#pragma once

// Internal to common/keras: overflow-checked sizes and Keras axis resolution.

#include <cstdint>
#include <optional>

#include "common/keras/shape.h"

namespace cohort::keras::internal {

inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The number of elements of `shape` (1 for ()); nullopt when a dimension is unknown or
// the product overflows int64 (callers say which).
inline std::optional<int64_t> NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == kUnknownDim) return std::nullopt;
    std::optional<int64_t> m = CheckedMul(n, d);
    if (!m) return std::nullopt;
    n = *m;
  }
  return n;
}

inline bool HasUnknownDim(const Shape& shape) {
  for (int64_t d : shape) {
    if (d == kUnknownDim) return true;
  }
  return false;
}

// Keras' `axis` (counting the batch dimension, negative from the end) on a tensor whose
// per-sample shape has `sample_rank` dimensions, as a non-negative axis; nullopt when
// out of range.
inline std::optional<int> NormalizeAxis(int axis, size_t sample_rank) {
  int rank = static_cast<int>(sample_rank) + 1;
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) return std::nullopt;
  return a;
}

}  // namespace cohort::keras::internal
