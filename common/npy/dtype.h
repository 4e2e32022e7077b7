#pragma once

// The element types Cohort reads from NumPy files: what a Keras dataset holds.

#include <cstddef>

#include "absl/strings/string_view.h"

namespace cohort::npy {

enum class DType {
  kFloat32,
  kFloat64,
  kInt32,
  kInt64,
  kUInt8,
  kBool,  // one byte, 0 or 1
};

// Bytes per element.
size_t ItemSize(DType dtype);
// NumPy's name: "float32", "float64", "int32", "int64", "uint8", "bool".
absl::string_view DTypeName(DType dtype);
// The .npy 'descr' string NumPy writes: "<f4", "<f8", "<i4", "<i8", "|u1", "|b1".
absl::string_view DTypeDescr(DType dtype);

}  // namespace cohort::npy
