#pragma once

// NumPy arrays on disk, read by rows: the x and y a trainer feeds a model.
//
// OpenNpy memory-maps a `.npy` file. OpenNpz memory-maps the member's bytes inside an
// `.npz` when the member is stored (np.savez), and inflates it into memory once when it
// is deflated (np.savez_compressed). Mapped pages are read from disk when first
// touched, so a rank that gathers only its shard's rows reads only those pages.
//
// An NpyArray is a dataset: C-ordered, at least one dimension, at least one row.
// Opening refuses 0-d arrays, zero rows, file sizes that do not match the header's
// shape, and the dtypes and layouts ParseNpyHeader refuses. A stored npz member's
// CRC-32 is not checked (that would read it all); a deflated member's is.
//
// Errors: NotFound for a missing file or npz key; InvalidArgument for anything wrong
// with the contents. Messages name the file (and key) and the offending dtype, shape,
// size, row or element.
//
// Thread safety: immutable once opened; any threads may call GatherRows and
// CheckFinite concurrently.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/npy/dtype.h"
#include "common/npy/npy_header.h"
#include "common/zip/mapped_file.h"

namespace cohort::npy {

class NpyArray {
 public:
  NpyArray(const NpyArray&) = delete;
  NpyArray& operator=(const NpyArray&) = delete;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t rows() const { return shape_[0]; }
  // Elements per row: the product of shape[1:], 1 for a 1-D array.
  int64_t row_elements() const { return row_elements_; }
  uint64_t row_bytes() const { return row_elements_ * ItemSize(dtype_); }
  // "x.npy", or "d.npz[x]" for a member: how messages name the array.
  const std::string& source() const { return source_; }
  // True when the data is memory-mapped, false when it was inflated into memory.
  bool mapped() const { return map_ != nullptr; }
  // The raw little-endian elements, rows() * row_bytes() of them; no alignment promised.
  const char* data() const { return data_; }

  // Copies the rows `indices` names, in that order, into `out` (indices.size() *
  // row_elements() elements of `out_dtype`, aligned for it), converting each element:
  //   to kFloat32: float64 rounds to nearest; ints become the nearest float; bool 0/1.
  //   to kInt64:   ints and bool exactly; floats only when they hold an integer in
  //                int64 range (labels saved as floats), else an error.
  // InvalidArgument for another out_dtype, an index outside [0, rows()), or a float
  // that is no integer; `out` is then partly written.
  absl::Status GatherRows(std::span<const int64_t> indices, DType out_dtype, void* out) const;

  // Reads every element. InvalidArgument naming the row and element of the first NaN
  // or infinity; OK at once for integer and bool arrays.
  absl::Status CheckFinite() const;

 private:
  friend absl::StatusOr<std::unique_ptr<NpyArray>> OpenNpy(const std::string& path);
  friend absl::StatusOr<std::unique_ptr<NpyArray>> OpenNpz(const std::string& path,
                                                           absl::string_view key);
  NpyArray() = default;
  // Parses and checks the .npy bytes held by `map` (or, when it is null, `owned`).
  static absl::StatusOr<std::unique_ptr<NpyArray>> FromBytes(std::string source,
                                                             std::unique_ptr<MappedFile> map,
                                                             std::string owned);

  std::string source_;
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  int64_t row_elements_ = 0;
  std::unique_ptr<MappedFile> map_;  // the .npy bytes, when mapped
  std::string owned_;                // the .npy bytes, when inflated
  const char* data_ = nullptr;       // past the header, in map_ or owned_
};

// Opens a `.npy` file.
absl::StatusOr<std::unique_ptr<NpyArray>> OpenNpy(const std::string& path);

// Opens member `key` (the name np.savez gave it, without ".npy") of an `.npz` file. An
// empty key picks the only member of a one-member file. NotFound lists the keys there.
absl::StatusOr<std::unique_ptr<NpyArray>> OpenNpz(const std::string& path, absl::string_view key);

// OpenNpy for "*.npy" (`key` must be empty), OpenNpz for "*.npz"; InvalidArgument for
// other extensions.
absl::StatusOr<std::unique_ptr<NpyArray>> OpenArray(const std::string& path,
                                                    absl::string_view key);

}  // namespace cohort::npy
