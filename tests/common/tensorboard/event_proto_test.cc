#include "common/tensorboard/event_proto.h"

#include <string>

#include <catch2/catch.hpp>

#include "common/tensorboard/crc32c.h"
#include "common/tensorboard/record.h"

namespace cohort::tensorboard {
namespace {

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

TEST_CASE("A scalars event has protobuf's wire encoding", "[tensorboard]") {
  std::string expected = Bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F,  // wall_time 1.5
                                0x10, 0x03,                          // step 3
                                0x2A, 0x0D,                          // summary, 13 bytes
                                0x0A, 0x0B,                          // value, 11 bytes
                                0x0A, 0x04, 'l', 'o', 's', 's',      // tag
                                0x15, 0x00, 0x00, 0x80, 0x3E});      // simple_value 0.25f
  CHECK(EncodeScalarsEvent(1.5, 3, {{"loss", 0.25f}}) == expected);
}

TEST_CASE("Steps are varints and step 0 is left out", "[tensorboard]") {
  std::string e = EncodeScalarsEvent(0, 300, {});
  CHECK(e.substr(9) == Bytes({0x10, 0xAC, 0x02, 0x2A, 0x00}));
  CHECK(EncodeScalarsEvent(0, 0, {}).substr(9) == Bytes({0x2A, 0x00}));
  // A negative int64 takes ten bytes, as protobuf writes it.
  CHECK(EncodeScalarsEvent(0, -1, {}).size() == 9 + 1 + 10 + 2);
}

TEST_CASE("Several scalars share one summary", "[tensorboard]") {
  std::string e = EncodeScalarsEvent(2.0, 1, {{"a", 1.0f}, {"b", 2.0f}});
  // header 9 + step 2 + summary tag/len 2 + 2 values of (2 + 3 + 5)
  CHECK(e.size() == 9 + 2 + 2 + 2 * 10);
  CHECK(e.substr(11, 2) == Bytes({0x2A, 20}));
}

TEST_CASE("The file_version event", "[tensorboard]") {
  std::string e = EncodeFileVersionEvent(1.5, kFileVersion);
  CHECK(e == Bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x1A, 13}) + "brain.Event:2");
}

TEST_CASE("A record frames its data with masked CRCs", "[tensorboard]") {
  std::string out;
  AppendRecord("abc", &out);
  REQUIRE(out.size() == 8 + 4 + 3 + 4);
  CHECK(out.substr(0, 8) == Bytes({3, 0, 0, 0, 0, 0, 0, 0}));
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(out[at + i]);
    return v;
  };
  CHECK(u32(8) == MaskCrc32c(Crc32c(out.substr(0, 8))));
  CHECK(out.substr(12, 3) == "abc");
  CHECK(u32(15) == MaskCrc32c(Crc32c("abc")));
  AppendRecord("", &out);
  CHECK(out.size() == 19 + 16);
}

}  // namespace
}  // namespace cohort::tensorboard
