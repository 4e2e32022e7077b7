// NpyArray::GatherRows and CheckFinite: the data loader's hot path. One switch on the
// (input, output) dtype pair picks a typed loop; the loops copy whole rows (memcpy when
// no conversion is needed) and load elements with memcpy because mapped npz members
// are not aligned.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/npy/npy_array.h"

namespace cohort::npy {
namespace {

struct Bool {};  // marks bool input: one byte, any non-zero is true

template <typename T>
using Storage = std::conditional_t<std::is_same_v<T, Bool>, uint8_t, T>;

template <typename In>
inline Storage<In> LoadAt(const char* p, int64_t i) {
  Storage<In> v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(v)), sizeof(v));
  return v;
}

// Converts one row of `n` elements; returns the index of an element that cannot be
// converted (a float that is no int64), or -1.
template <typename In, typename Out>
int64_t ConvertRow(const char* src, int64_t n, Out* __restrict dst) {
  if constexpr (std::is_same_v<In, Bool>) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Out>(LoadAt<In>(src, i) != 0);
  } else if constexpr (std::is_floating_point_v<In> && std::is_integral_v<Out>) {
    for (int64_t i = 0; i < n; ++i) {
      In v = LoadAt<In>(src, i);
      // [-2^63, 2^63) holds exactly the floats that convert to int64.
      if (!(v >= In(-9223372036854775808.0) && v < In(9223372036854775808.0)) || v != std::trunc(v)) {
        return i;
      }
      dst[i] = static_cast<Out>(v);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Out>(LoadAt<In>(src, i));
  }
  return -1;
}

template <typename In, typename Out>
absl::Status Gather(const NpyArray& a, std::span<const int64_t> indices, Out* out) {
  const int64_t rows = a.rows();
  const int64_t n = a.row_elements();
  const uint64_t row_bytes = a.row_bytes();
  for (size_t k = 0; k < indices.size(); ++k) {
    int64_t row = indices[k];
    if (row < 0 || row >= rows) {
      return absl::InvalidArgumentError(absl::StrCat(a.source(), ": row index ", row,
                                                     " is outside [0, ", rows, ")"));
    }
    const char* src = a.data() + static_cast<uint64_t>(row) * row_bytes;
    Out* dst = out + static_cast<int64_t>(k) * n;
    if constexpr (std::is_same_v<In, Out>) {
      std::memcpy(dst, src, row_bytes);
    } else {
      int64_t bad = ConvertRow<In, Out>(src, n, dst);
      if (bad >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            a.source(), ": row ", row, " element ", bad, " (", LoadAt<In>(src, bad),
            ") is not an integer in int64 range; cannot convert ", DTypeName(a.dtype()),
            " to int64"));
      }
    }
  }
  return absl::OkStatus();
}

template <typename Out>
absl::Status GatherTo(const NpyArray& a, std::span<const int64_t> indices, Out* out) {
  switch (a.dtype()) {
    case DType::kFloat32: return Gather<float, Out>(a, indices, out);
    case DType::kFloat64: return Gather<double, Out>(a, indices, out);
    case DType::kInt32: return Gather<int32_t, Out>(a, indices, out);
    case DType::kInt64: return Gather<int64_t, Out>(a, indices, out);
    case DType::kUInt8: return Gather<uint8_t, Out>(a, indices, out);
    case DType::kBool: return Gather<Bool, Out>(a, indices, out);
  }
  return absl::InternalError("unknown dtype");
}

// Whether any of elements [begin, end) has an all-ones exponent: NaN or infinity.
// Branch-free over the bits so that it vectorizes.
template <typename Bits, Bits kExponent>
bool AnyNonFinite(const char* data, int64_t begin, int64_t end) {
  Bits any = 0;
  for (int64_t i = begin; i < end; ++i) {
    Bits exponent = LoadAt<Bits>(data, i) & kExponent;
    any |= static_cast<Bits>(exponent == kExponent);
  }
  return any != 0;
}

template <typename F, typename Bits, Bits kExponent>
absl::Status ScanFinite(const NpyArray& a) {
  const int64_t total = a.rows() * a.row_elements();
  constexpr int64_t kBlock = 4096;
  for (int64_t start = 0; start < total; start += kBlock) {
    int64_t end = std::min(total, start + kBlock);
    if (!AnyNonFinite<Bits, kExponent>(a.data(), start, end)) continue;
    for (int64_t i = start; i < end; ++i) {
      F v = LoadAt<F>(a.data(), i);
      if (std::isfinite(v)) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          a.source(), ": row ", i / a.row_elements(), " element ", i % a.row_elements(), " is ",
          std::isnan(v) ? "NaN" : (v > 0 ? "+inf" : "-inf")));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status NpyArray::GatherRows(std::span<const int64_t> indices, DType out_dtype,
                                  void* out) const {
  if (out_dtype == DType::kFloat32) return GatherTo(*this, indices, static_cast<float*>(out));
  if (out_dtype == DType::kInt64) return GatherTo(*this, indices, static_cast<int64_t*>(out));
  return absl::InvalidArgumentError(absl::StrCat(source_, ": cannot gather rows as ",
                                                 DTypeName(out_dtype), "; use float32 or int64"));
}

absl::Status NpyArray::CheckFinite() const {
  if (dtype_ == DType::kFloat32) return ScanFinite<float, uint32_t, 0x7F800000u>(*this);
  if (dtype_ == DType::kFloat64) {
    return ScanFinite<double, uint64_t, 0x7FF0000000000000ull>(*this);
  }
  return absl::OkStatus();
}

}  // namespace cohort::npy
