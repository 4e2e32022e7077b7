#pragma once

// TFRecord framing, the container of TensorBoard event files. Each record is
//
//   uint64 length            little-endian
//   uint32 masked_crc32c(length bytes)
//   byte   data[length]
//   uint32 masked_crc32c(data)
//
// A reader stops at the first record that is incomplete, so a file that is only ever
// appended to in whole records stays readable up to its last complete one.
// Thread-safe (pure functions).

#include <string>

#include "absl/strings/string_view.h"

namespace cohort::tensorboard {

// Appends `data`, framed as one record, to `out`.
void AppendRecord(absl::string_view data, std::string* out);

}  // namespace cohort::tensorboard
