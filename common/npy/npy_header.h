#pragma once

// The NumPy `.npy` header (numpy/lib/format.py): the magic "\x93NUMPY", a version
// (1.0: 16-bit header length; 2.0 and 3.0: 32-bit; 3.0 allows UTF-8), then a Python
// dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and a newline. The array's bytes follow it.
//
// Parsing is a small strict reader of exactly that literal (no eval): the three keys
// once each, a string 'descr', a bool 'fortran_order', a tuple of non-negative ints
// 'shape'. Accepted dtypes: DType's, little-endian ('<') or byte-order-free ('|').
// Refused, with a message naming the source and the dtype: big-endian, other types
// (float16, int8, strings, objects, structured), fortran_order=True.
//
// Thread safety: free functions without shared state.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/npy/dtype.h"

namespace cohort::npy {

struct NpyHeader {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // empty for a 0-d array
  uint64_t data_offset = 0;    // bytes before the array data: magic, lengths, dict
  uint64_t data_bytes = 0;     // product(shape) * ItemSize(dtype)
};

// Parses the header at the start of `bytes` (which may go on into the data, or be the
// whole file). `source` names the file in messages ("x.npy", "d.npz[x]"). Every error
// is InvalidArgument; any input, however malformed, gives an error and no crash.
absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes, absl::string_view source);

// The shape as Python writes the tuple: "()", "(3,)", "(3, 4)".
std::string ShapeString(const std::vector<int64_t>& shape);

// The header NumPy would write for a C-ordered array: version 1.0 unless the dict
// needs more than 64 KiB (then 2.0), padded so the data starts at a multiple of 64.
std::string EncodeNpyHeader(DType dtype, const std::vector<int64_t>& shape);

}  // namespace cohort::npy
