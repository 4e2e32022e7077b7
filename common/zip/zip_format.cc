#include "common/zip/zip_format.h"

#include <zlib.h>

#include "absl/strings/str_cat.h"
#include "common/zip/zip_entry.h"

namespace cohort::zip {

std::string MethodName(Method method) {
  switch (method) {
    case Method::kStored:
      return "stored";
    case Method::kDeflate:
      return "deflate";
  }
  // Names for the methods other tools commonly write, so refusals say what they met.
  switch (static_cast<uint16_t>(method)) {
    case 12: return "method 12 (bzip2)";
    case 14: return "method 14 (lzma)";
    case 93: return "method 93 (zstd)";
    case 99: return "method 99 (AES encryption)";
  }
  return absl::StrCat("method ", static_cast<uint16_t>(method));
}

namespace internal {

absl::Status ValidateEntryName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("empty entry name");
  if (name.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError("entry name contains a NUL byte");
  }
  if (name[0] == '/' || name[0] == '\\' || (name.size() >= 2 && name[1] == ':')) {
    return absl::InvalidArgumentError(absl::StrCat("entry name '", name, "' is an absolute path"));
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find_first_of("/\\", start);
    if (end == absl::string_view::npos) end = name.size();
    if (name.substr(start, end - start) == "..") {
      return absl::InvalidArgumentError(absl::StrCat("entry name '", name, "' contains '..'"));
    }
    start = end + 1;
  }
  return absl::OkStatus();
}

uint32_t Crc32(absl::string_view bytes) {
  return static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

}  // namespace internal
}  // namespace cohort::zip
