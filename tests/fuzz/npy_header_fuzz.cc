// libFuzzer entry point for the .npy header parser (common/npy/npy_header.h): any bytes
// must give a header or an error, never a crash, an overread or a hang. A header that
// parses must describe itself consistently and survive EncodeNpyHeader round trips.

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "common/npy/npy_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto header = cohort::npy::ParseNpyHeader(bytes, "fuzz.npy");
  if (!header.ok()) return 0;
  if (header->data_offset > size) std::abort();
  uint64_t elements = 1;
  for (int64_t dim : header->shape) {
    if (dim < 0) std::abort();
    elements *= static_cast<uint64_t>(dim);
  }
  if (elements * cohort::npy::ItemSize(header->dtype) != header->data_bytes) std::abort();
  if (header->shape.size() <= 64) {
    std::string encoded = cohort::npy::EncodeNpyHeader(header->dtype, header->shape);
    auto again = cohort::npy::ParseNpyHeader(encoded, "encoded.npy");
    if (!again.ok() || again->shape != header->shape || again->dtype != header->dtype ||
        again->data_offset != encoded.size() || encoded.size() % 64 != 0) {
      std::abort();
    }
  }
  return 0;
}
