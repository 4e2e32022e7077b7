#pragma once

// The one arithmetic the CPU all-reduces do: adding a peer's floats into this rank's.

#include <cstddef>

namespace cohort::trainer::collective {

// out[i] += in[i] for i < n; the ranges must not overlap. Vectorized: its file is built
// with -O3, which the library's -O2 does not do for this loop.
void AddInto(float* __restrict out, const float* __restrict in, size_t n);

// sum[i] = a[i] + b[i] for i < n, written to `out` and, when not null, to `also` too, in
// one pass. `also` may be `a` or `b` itself (each element is read before it is
// written); `out` overlaps none of them. Vectorized as AddInto.
void SumTo(float* __restrict out, float* also, const float* a, const float* b, size_t n);

}  // namespace cohort::trainer::collective
