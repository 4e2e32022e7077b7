#pragma once

// One member of a ZIP archive, as its central directory describes it.

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace cohort::zip {

// The compression methods Cohort reads and writes (APPNOTE 4.4.5). An entry read from
// an archive may carry any other 16-bit value; reading such an entry fails.
enum class Method : uint16_t {
  kStored = 0,
  kDeflate = 8,
};

// "stored", "deflate", or "method N" (with a name for common ones: "method 12 (bzip2)").
std::string MethodName(Method method);

struct ZipEntry {
  std::string name;  // as stored: '/'-separated, relative, no "..", never empty
  Method method = Method::kStored;
  uint16_t flags = 0;  // general purpose bit flags
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  // Absolute offset in the archive of the entry's (compressed) data, just past its
  // local header. For a stored, unencrypted entry the bytes at
  // [data_offset, data_offset + uncompressed_size) are the member itself.
  uint64_t data_offset = 0;

  bool encrypted() const { return (flags & 0x0001) != 0; }
  bool is_directory() const { return !name.empty() && name.back() == '/'; }
};

}  // namespace cohort::zip
