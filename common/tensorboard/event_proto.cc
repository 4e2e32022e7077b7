#include "common/tensorboard/event_proto.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace cohort::tensorboard {
namespace {

// Wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutTag(uint32_t field, uint32_t wire_type, std::string* out) {
  PutVarint((static_cast<uint64_t>(field) << 3) | wire_type, out);
}

// Little-endian, as protobuf's fixed-width fields are.
template <typename T>
void PutFixed(T value, std::string* out) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  if constexpr (std::endian::native == std::endian::big) std::reverse(bytes, bytes + sizeof(T));
  out->append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

void PutBytes(uint32_t field, absl::string_view bytes, std::string* out) {
  PutTag(field, kLengthDelimited, out);
  PutVarint(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}

// Event fields 1 and 2. Step 0 is the default and is left out, as protobuf does.
std::string EventHeader(double wall_time, int64_t step) {
  std::string out;
  PutTag(1, kFixed64, &out);
  PutFixed(wall_time, &out);
  if (step != 0) {
    PutTag(2, kVarint, &out);
    PutVarint(static_cast<uint64_t>(step), &out);  // negative int64: ten bytes, as protobuf
  }
  return out;
}

}  // namespace

std::string EncodeFileVersionEvent(double wall_time, absl::string_view file_version) {
  std::string out = EventHeader(wall_time, 0);
  PutBytes(3, file_version, &out);
  return out;
}

std::string EncodeScalarsEvent(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  std::string summary;
  for (const Scalar& s : scalars) {
    std::string value;
    PutBytes(1, s.tag, &value);
    PutTag(2, kFixed32, &value);
    PutFixed(s.value, &value);
    PutBytes(1, value, &summary);
  }
  std::string out = EventHeader(wall_time, step);
  PutBytes(5, summary, &out);
  return out;
}

}  // namespace cohort::tensorboard
