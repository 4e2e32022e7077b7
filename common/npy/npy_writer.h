#pragma once

// Writes `.npy` files that np.load reads: a version 1.0 header as NumPy writes it
// (see EncodeNpyHeader), then the elements. Atomic like AtomicFile: the file appears at
// `path` whole, or not at all.
//
// Thread safety: a free function; concurrent calls must use different paths.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/npy/dtype.h"

namespace cohort::npy {

// Writes a C-ordered array of `shape` (any rank, 0-d included) whose product(shape) *
// ItemSize(dtype) bytes of little-endian elements start at `data`. InvalidArgument for
// a negative dimension; errno-derived codes for I/O failures.
absl::Status WriteNpy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                      const void* data);

}  // namespace cohort::npy
