#include "common/npy/npy_writer.h"

#include <filesystem>

#include <catch2/catch.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/npy/npy_array.h"
#include "tests/common/zip/python.h"
#include "tests/support/temp_dir.h"

namespace cohort::npy {
namespace {

using testing::RunPython;
using testing::TempDir;

constexpr const char* kHelper = "tests/common/npy/npy_helper.py";

TEST_CASE("WriteNpy writes byte for byte what np.save writes", "[npy]") {
  TempDir dir;
  std::vector<float> f = {1.5f, -2.0f, 3.25f, 0.0f, 1e30f, -1e-30f};
  std::vector<int64_t> i = {1, -2, 1LL << 40};
  std::vector<uint8_t> u = {0, 1, 255};
  std::vector<uint8_t> b = {1, 0, 1, 1};
  std::vector<double> d = {3.0};
  struct Case {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const void* data;
    size_t bytes;
    std::string python;  // dtype.str and shape, as the helper prints them
  };
  std::vector<Case> cases = {
      {"f.npy", DType::kFloat32, {2, 3}, f.data(), 24, "<f4 (2, 3)"},
      {"i.npy", DType::kInt64, {3}, i.data(), 24, "<i8 (3,)"},
      {"u.npy", DType::kUInt8, {3, 1}, u.data(), 3, "|u1 (3, 1)"},
      {"b.npy", DType::kBool, {2, 2}, b.data(), 4, "|b1 (2, 2)"},
      {"d.npy", DType::kFloat64, {}, d.data(), 8, "<f8 ()"},
      {"e.npy", DType::kInt32, {0, 4}, nullptr, 0, "<i4 (0, 4)"},
  };
  std::vector<std::string> paths;
  std::string expected;
  for (const Case& c : cases) {
    REQUIRE(WriteNpy(dir.File(c.name), c.dtype, c.shape, c.data).ok());
    paths.push_back(dir.File(c.name));
    absl::StrAppend(&expected, c.python, " same ",
                    absl::BytesToHexString(absl::string_view(static_cast<const char*>(c.data), c.bytes)),
                    "\n");
  }
  std::vector<std::string> args = {"check"};
  args.insert(args.end(), paths.begin(), paths.end());
  CHECK(RunPython(kHelper, args) == expected);

  // And we read back what we wrote.
  auto a = OpenNpy(dir.File("f.npy"));
  REQUIRE(a.ok());
  std::vector<float> back(6);
  REQUIRE((*a)->GatherRows(std::vector<int64_t>{0, 1}, DType::kFloat32, back.data()).ok());
  CHECK(back == f);
}

TEST_CASE("WriteNpy refuses negative shapes and leaves nothing behind", "[npy]") {
  TempDir dir;
  std::vector<float> f(4);
  absl::Status s = WriteNpy(dir.File("x.npy"), DType::kFloat32, {2, -2}, f.data());
  CHECK_THAT(std::string(s.message()), Catch::Contains("x.npy: cannot write shape (2, -2)"));
  s = WriteNpy(dir.File("missing/x.npy"), DType::kFloat32, {4}, f.data());
  CHECK(s.code() == absl::StatusCode::kNotFound);
  CHECK(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace cohort::npy
