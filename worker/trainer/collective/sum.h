#pragma once

// The one arithmetic the CPU all-reduces do: adding a peer's floats into this rank's.

#include <cstddef>

namespace cohort::trainer::collective {

// out[i] += in[i] for i < n; the ranges must not overlap. Vectorized: its file is built
// with -O3, which the library's -O2 does not do for this loop.
void AddInto(float* __restrict out, const float* __restrict in, size_t n);

}  // namespace cohort::trainer::collective
