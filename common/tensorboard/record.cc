#include "common/tensorboard/record.h"

#include <cstdint>

#include "common/tensorboard/crc32c.h"

namespace cohort::tensorboard {
namespace {

template <typename T>
std::string LittleEndian(T v) {
  std::string bytes(sizeof(T), '\0');
  for (size_t i = 0; i < sizeof(T); ++i) bytes[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return bytes;
}

}  // namespace

void AppendRecord(absl::string_view data, std::string* out) {
  std::string length = LittleEndian<uint64_t>(data.size());
  out->append(length);
  out->append(LittleEndian<uint32_t>(MaskCrc32c(Crc32c(length))));
  out->append(data.data(), data.size());
  out->append(LittleEndian<uint32_t>(MaskCrc32c(Crc32c(data))));
}

}  // namespace cohort::tensorboard
