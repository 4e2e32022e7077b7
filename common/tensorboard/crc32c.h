#pragma once

// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected), as TFRecord files and
// leveldb use it, and the "masked" form TFRecord stores so that a CRC of data that
// itself holds CRCs is not degenerate. Software only (a byte-wise table): event files
// are small. Thread-safe.

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace cohort::tensorboard {

// The CRC-32C of `data` continued from `crc` (the CRC of the bytes before it; 0 for
// none): Crc32c(a + b) == ExtendCrc32c(Crc32c(a), b).
uint32_t ExtendCrc32c(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(absl::string_view data) { return ExtendCrc32c(0, data.data(), data.size()); }

// TFRecord's mask: rotate right by 15 bits and add a constant.
inline uint32_t MaskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace cohort::tensorboard
