#pragma once

// ZIP record layouts (PKWARE APPNOTE 6.3.x) shared by the reader and the writer.
// Internal to common/zip.

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort::zip::internal {

inline constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
inline constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
inline constexpr uint32_t kEndSignature = 0x06054b50;
inline constexpr uint32_t kZip64EndSignature = 0x06064b50;
inline constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
inline constexpr uint16_t kZip64ExtraId = 0x0001;

inline constexpr size_t kLocalHeaderSize = 30;
inline constexpr size_t kCentralHeaderSize = 46;
inline constexpr size_t kEndSize = 22;
inline constexpr size_t kZip64EndSize = 56;
inline constexpr size_t kZip64LocatorSize = 20;

// A 32-bit (16-bit) field holding this value means "see the ZIP64 record".
inline constexpr uint32_t kZip64Marker32 = 0xFFFFFFFF;
inline constexpr uint16_t kZip64Marker16 = 0xFFFF;

inline constexpr uint16_t kFlagEncrypted = 0x0001;
inline constexpr uint16_t kFlagStrongEncryption = 0x0040;
inline constexpr uint16_t kFlagUtf8 = 0x0800;

inline constexpr uint16_t kVersionDefault = 20;  // deflate, directories
inline constexpr uint16_t kVersionZip64 = 45;

// DEFLATE cannot expand data by more than about 1032:1 (a 258-byte match in under two
// bits); a declared size beyond this is a corrupt or hostile header.
inline constexpr uint64_t kMaxDeflateRatio = 1032;

// Little-endian loads from a buffer the caller has bounds-checked.
inline uint16_t Load16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint16_t>(u[0] | (u[1] << 8));
}
inline uint32_t Load32(const char* p) {
  return static_cast<uint32_t>(Load16(p)) | (static_cast<uint32_t>(Load16(p + 2)) << 16);
}
inline uint64_t Load64(const char* p) {
  return static_cast<uint64_t>(Load32(p)) | (static_cast<uint64_t>(Load32(p + 4)) << 32);
}

inline void Put16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v & 0xFF));
  out.push_back(static_cast<char>(v >> 8));
}
inline void Put32(std::string& out, uint32_t v) {
  Put16(out, static_cast<uint16_t>(v & 0xFFFF));
  Put16(out, static_cast<uint16_t>(v >> 16));
}
inline void Put64(std::string& out, uint64_t v) {
  Put32(out, static_cast<uint32_t>(v & 0xFFFFFFFF));
  Put32(out, static_cast<uint32_t>(v >> 32));
}

// OK when `name` is a safe relative member name: non-empty, no NUL, not absolute
// ("/x", "\x", "C:x"), no ".." component ('/' and '\' both count as separators).
// The message says what is wrong; callers prefix the archive's name.
absl::Status ValidateEntryName(absl::string_view name);

// CRC-32 (the zlib/ZIP polynomial) of any length of bytes.
uint32_t Crc32(absl::string_view bytes);

}  // namespace cohort::zip::internal
