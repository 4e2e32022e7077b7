#include "common/tensorboard/crc32c.h"

#include <string>

#include <catch2/catch.hpp>

namespace cohort::tensorboard {
namespace {

TEST_CASE("CRC32C matches the check value and RFC 3720's vectors", "[tensorboard]") {
  CHECK(Crc32c("") == 0u);
  CHECK(Crc32c("123456789") == 0xE3069283u);  // the catalogue's check value
  // RFC 3720 (iSCSI), appendix B.4.
  CHECK(Crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(Crc32c(std::string(32, '\xFF')) == 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  CHECK(Crc32c(ascending) == 0x46DD794Eu);
  CHECK(Crc32c(descending) == 0x113FDB5Cu);
  // leveldb's crc32c_test: an iSCSI SCSI Read(10) command PDU.
  const unsigned char pdu[48] = {
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
      0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  CHECK(ExtendCrc32c(0, pdu, sizeof(pdu)) == 0xD9963A56u);
}

TEST_CASE("CRC32C extends piece by piece", "[tensorboard]") {
  std::string text = "hello world, this is TFRecord framing";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    uint32_t first = Crc32c(absl::string_view(text).substr(0, cut));
    CHECK(ExtendCrc32c(first, text.data() + cut, text.size() - cut) == Crc32c(text));
  }
  CHECK(Crc32c("a") != Crc32c("b"));
}

TEST_CASE("The mask is TFRecord's and can be undone", "[tensorboard]") {
  CHECK(MaskCrc32c(0) == 0xa282ead8u);
  // masked_crc32c(b"123456789") as TensorBoard's own writer computes it
  // (tensorboard.compat.tensorflow_stub.pywrap_tensorflow).
  CHECK(MaskCrc32c(Crc32c("123456789")) == 0xC78AB0E5u);
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu, 0x80000000u}) {
    CHECK(UnmaskCrc32c(MaskCrc32c(crc)) == crc);
    CHECK(MaskCrc32c(crc) != crc);
  }
}

}  // namespace
}  // namespace cohort::tensorboard
