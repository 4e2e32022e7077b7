#include "common/npy/npy_header.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"

namespace cohort::npy {
namespace {

// A version 1.0 file prefix around `dict`.
std::string V1(absl::string_view dict) {
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(dict.size() & 0xFF));
  out.push_back(static_cast<char>(dict.size() >> 8));
  return absl::StrCat(out, dict);
}

std::string ErrorOf(absl::string_view bytes) {
  auto h = ParseNpyHeader(bytes, "t.npy");
  REQUIRE_FALSE(h.ok());
  CHECK(h.status().code() == absl::StatusCode::kInvalidArgument);
  std::string m(h.status().message());
  CHECK_THAT(m, Catch::StartsWith("t.npy: "));
  return m;
}

TEST_CASE("ParseNpyHeader reads the dict NumPy writes, in any order and spacing", "[npy]") {
  auto h = ParseNpyHeader(V1("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }    \n"), "t");
  REQUIRE(h.ok());
  CHECK(h->dtype == DType::kFloat32);
  CHECK(h->shape == std::vector<int64_t>{3, 4});
  CHECK(h->data_bytes == 48);
  h = ParseNpyHeader(V1("{\"shape\":(7,),\"descr\":\"|b1\",\"fortran_order\":False}"), "t");
  REQUIRE(h.ok());
  CHECK(h->dtype == DType::kBool);
  CHECK(h->shape == std::vector<int64_t>{7});
  h = ParseNpyHeader(V1("{ 'fortran_order' : False , 'shape' : ( ) , 'descr' : '<i8' , }\n"), "t");
  REQUIRE(h.ok());
  CHECK(h->shape.empty());
  CHECK(h->data_bytes == 8);
  h = ParseNpyHeader(V1("{'descr': '<u1', 'fortran_order': False, 'shape': (2, 0, 5,), }"), "t");
  REQUIRE(h.ok());
  CHECK(h->dtype == DType::kUInt8);
  CHECK(h->data_bytes == 0);
}

TEST_CASE("EncodeNpyHeader writes what ParseNpyHeader reads, 64-byte aligned", "[npy]") {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{}, {5}, {3, 4}, {1, 2, 3, 4, 5}}) {
    std::string header = EncodeNpyHeader(DType::kInt32, shape);
    CHECK(header.size() % 64 == 0);
    CHECK(header.back() == '\n');
    auto h = ParseNpyHeader(header, "t");
    REQUIRE(h.ok());
    CHECK(h->shape == shape);
    CHECK(h->dtype == DType::kInt32);
    CHECK(h->data_offset == header.size());
  }
  // A dict past 64 KiB needs version 2.0.
  std::vector<int64_t> long_shape(30000, 1);
  std::string header = EncodeNpyHeader(DType::kFloat64, long_shape);
  CHECK(header[6] == 2);
  CHECK(header.size() % 64 == 0);
  auto h = ParseNpyHeader(header, "t");
  REQUIRE(h.ok());
  CHECK(h->shape == long_shape);
}

TEST_CASE("ParseNpyHeader names what is wrong with a header", "[npy]") {
  CHECK_THAT(ErrorOf("hello"), Catch::Contains("not a .npy file"));
  CHECK_THAT(ErrorOf(std::string("\x93NUMPY\x04\x00", 8)), Catch::Contains("version 4.0"));
  CHECK_THAT(ErrorOf(std::string("\x93NUMPY\x01\x00\xff\x00{", 11)),
             Catch::Contains("truncated .npy header: it needs 265 bytes, only 11 present"));
  CHECK_THAT(ErrorOf(V1("{'descr': '<f4', 'shape': (3,), }")),
             Catch::Contains("needs 'descr', 'fortran_order' and 'shape'"));
  CHECK_THAT(ErrorOf(V1("{'descr': '<f4', 'descr': '<f4', }")), Catch::Contains("repeated key 'descr'"));
  CHECK_THAT(ErrorOf(V1("{'descr': '<f4', 'other': 1}")), Catch::Contains("key 'other'"));
  CHECK_THAT(ErrorOf(V1("{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}")),
             Catch::Contains("'fortran_order' is not True or False"));
  CHECK_THAT(ErrorOf(V1("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}")),
             Catch::Contains("'shape' is not a tuple"));
  CHECK_THAT(ErrorOf(V1("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}")),
             Catch::Contains("'shape' is not a tuple of non-negative ints"));
  CHECK_THAT(ErrorOf(V1("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}")),
             Catch::Contains("does not fit in 64 bits"));
  CHECK_THAT(ErrorOf(V1("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}")),
             Catch::Contains("shape (4294967296, 4294967296) is too large"));
  CHECK_THAT(ErrorOf(V1("{'descr': '<f4, 'fortran_order': False}")), Catch::Contains("malformed"));
  CHECK_THAT(ErrorOf(V1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} junk")),
             Catch::Contains("unexpected text after the dict"));
  CHECK_THAT(ErrorOf(V1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,)}")),
             Catch::Contains("structured dtypes"));
}

TEST_CASE("ParseNpyHeader refuses other dtypes and Fortran order by name", "[npy]") {
  auto with = [](absl::string_view descr, absl::string_view fortran = "False") {
    return V1(absl::StrCat("{'descr': '", descr, "', 'fortran_order': ", fortran, ", 'shape': (3,), }"));
  };
  CHECK_THAT(ErrorOf(with(">f4")), Catch::Contains("unsupported dtype '>f4' (big-endian"));
  CHECK_THAT(ErrorOf(with("<f2")), Catch::Contains("'<f2' (floating point)") &&
                                       Catch::Contains("supported: float32 (<f4), float64 (<f8)"));
  CHECK_THAT(ErrorOf(with("|O")), Catch::Contains("'|O' (Python object)"));
  CHECK_THAT(ErrorOf(with("<U3")), Catch::Contains("'<U3' (unicode string)"));
  CHECK_THAT(ErrorOf(with("|i1")), Catch::Contains("'|i1' (signed integer)"));
  CHECK_THAT(ErrorOf(with("|f4")), Catch::Contains("unsupported dtype '|f4'"));
  CHECK_THAT(ErrorOf(with("<f4", "True")), Catch::Contains("fortran_order=True"));
  // One-byte types may say '<' as well as '|'.
  auto h = ParseNpyHeader(with("<u1"), "t");
  REQUIRE(h.ok());
  CHECK(h->dtype == DType::kUInt8);
}

}  // namespace
}  // namespace cohort::npy
