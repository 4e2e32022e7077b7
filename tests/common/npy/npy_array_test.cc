#include "common/npy/npy_array.h"

#include <chrono>
#include <cstring>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "tests/common/zip/python.h"
#include "tests/support/temp_dir.h"

namespace cohort::npy {
namespace {

using testing::ReadFile;
using testing::RunPython;
using testing::TempDir;

constexpr const char* kHelper = "tests/common/npy/npy_helper.py";
// npy_helper.py's GATHER: the rows each fixture's .f32/.i64 expectation holds.
const std::vector<int64_t> kGather = {36, 0, 5, 5, 17, 36, 1, 30, 2};

const TempDir& Fixtures() {
  static TempDir dir;
  static bool made = false;
  if (!made) {
    RunPython(kHelper, {"fixtures", dir.path()});
    made = true;
  }
  return dir;
}

std::string Path(const std::string& name) { return Fixtures().File(name); }
std::string Message(const absl::Status& s) { return std::string(s.message()); }

// Gathers kGather as `out_dtype` and returns the bytes.
template <typename T>
std::string Gathered(const NpyArray& a, DType out_dtype, const std::vector<int64_t>& rows) {
  std::vector<T> out(rows.size() * a.row_elements());
  absl::Status s = a.GatherRows(rows, out_dtype, out.data());
  INFO(s.ToString());
  REQUIRE(s.ok());
  return std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(T));
}

struct Fixture {
  const char* name;
  DType dtype;
};
constexpr Fixture kFixtures[] = {
    {"float32", DType::kFloat32}, {"float64", DType::kFloat64}, {"int32", DType::kInt32},
    {"int64", DType::kInt64},     {"uint8", DType::kUInt8},     {"bool", DType::kBool},
    {"float32_int", DType::kFloat32}, {"float64_int", DType::kFloat64}, {"labels", DType::kInt64},
};

// Checks `a` against the expectations npy_helper.py wrote for fixture `name`.
void CheckAgainstNumpy(const NpyArray& a, const Fixture& f) {
  CHECK(a.dtype() == f.dtype);
  std::string name = f.name;
  if (name == "labels") {
    CHECK(a.shape() == std::vector<int64_t>{37});
    CHECK(a.row_elements() == 1);
  } else {
    CHECK(a.shape() == std::vector<int64_t>{37, 3, 2});
    CHECK(a.rows() == 37);
    CHECK(a.row_elements() == 6);
    CHECK(a.row_bytes() == 6 * ItemSize(f.dtype));
  }
  CHECK(Gathered<float>(a, DType::kFloat32, kGather) == ReadFile(Path(name + ".f32")));
  std::string i64 = ReadFile(Path(name + ".i64"));
  if (!i64.empty()) CHECK(Gathered<int64_t>(a, DType::kInt64, kGather) == i64);
  CHECK(a.CheckFinite().ok());
}

TEST_CASE("OpenNpy reads every dtype in .npy versions 1.0, 2.0 and 3.0", "[npy]") {
  for (const Fixture& f : kFixtures) {
    for (const char* suffix : {".npy", "_v2.npy", "_v3.npy"}) {
      std::string file = absl::StrCat(f.name, suffix);
      INFO(file);
      auto a = OpenNpy(Path(file));
      REQUIRE(a.ok());
      CHECK((*a)->mapped());
      CHECK((*a)->source() == Path(file));
      CheckAgainstNumpy(**a, f);
    }
  }
}

TEST_CASE("OpenNpz reads members of np.savez (mapped) and np.savez_compressed (inflated)", "[npy]") {
  for (const char* npz : {"savez.npz", "compressed.npz"}) {
    for (const Fixture& f : kFixtures) {
      INFO(npz << " " << f.name);
      auto a = OpenNpz(Path(npz), f.name);
      REQUIRE(a.ok());
      CHECK((*a)->mapped() == (std::string(npz) == "savez.npz"));
      CHECK((*a)->source() == absl::StrCat(Path(npz), "[", f.name, "]"));
      CheckAgainstNumpy(**a, f);
    }
  }
  auto single = OpenArray(Path("single.npz"), "");
  REQUIRE(single.ok());
  CHECK((*single)->source() == Path("single.npz") + "[arr_0]");
  CheckAgainstNumpy(**single, {"labels", DType::kInt64});
}

TEST_CASE("OpenNpz names the keys when the one asked for is missing", "[npy]") {
  auto missing = OpenNpz(Path("savez.npz"), "y");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(Message(missing.status()),
             Catch::Contains("savez.npz: no array 'y'; keys: float32, float64, int32, int64, uint8, "
                             "bool, float32_int, float64_int, labels"));
  auto unnamed = OpenNpz(Path("savez.npz"), "");
  REQUIRE_FALSE(unnamed.ok());
  CHECK_THAT(Message(unnamed.status()), Catch::Contains("name the array to use"));
}

TEST_CASE("OpenArray dispatches on the extension", "[npy]") {
  auto npy = OpenArray(Path("labels.npy"), "");
  REQUIRE(npy.ok());
  CHECK((*npy)->rows() == 37);
  auto npz = OpenArray(Path("savez.npz"), "labels");
  REQUIRE(npz.ok());
  CHECK((*npz)->rows() == 37);
  auto keyed = OpenArray(Path("labels.npy"), "x");
  REQUIRE_FALSE(keyed.ok());
  CHECK_THAT(Message(keyed.status()), Catch::Contains("only for .npz"));
  auto other = OpenArray(Path("labels.csv"), "");
  REQUIRE_FALSE(other.ok());
  CHECK_THAT(Message(other.status()), Catch::Contains("labels.csv: unknown array file type"));
  auto missing = OpenArray(Path("missing.npy"), "");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("GatherRows reads the rows of a large mapped array, fast", "[npy]") {
  std::string expected = ReadFile(Path("big_gather.f32"));
  std::vector<int64_t> rows(5000);
  for (int64_t k = 0; k < 5000; ++k) rows[k] = (k * 7919) % 200000;
  for (const char* file : {"big.npy", "big.npz"}) {
    INFO(file);
    auto a = OpenArray(Path(file), std::string(file) == "big.npz" ? "x" : "");
    REQUIRE(a.ok());
    CHECK((*a)->mapped());
    CHECK((*a)->shape() == std::vector<int64_t>{200000, 32});
    CHECK(Gathered<float>(**a, DType::kFloat32, rows) == expected);
    // A loader's step: 256 rows of 32 floats. Generous bound: about 1 ms here.
    std::vector<float> out(256 * 32);
    auto start = std::chrono::steady_clock::now();
    for (int step = 0; step < 200; ++step) {
      REQUIRE((*a)->GatherRows(std::span(rows).subspan(step * 20, 256), DType::kFloat32, out.data()).ok());
    }
    double per_step_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / 200;
    INFO("per step: " << per_step_us << " us");
    CHECK(per_step_us < 1000);
  }
}

TEST_CASE("GatherRows refuses bad indices, dtypes and conversions", "[npy]") {
  auto a = OpenNpy(Path("float32.npy"));
  REQUIRE(a.ok());
  std::vector<float> out(6 * 2);
  absl::Status s = (*a)->GatherRows(std::vector<int64_t>{0, 37}, DType::kFloat32, out.data());
  CHECK_THAT(Message(s), Catch::Contains("float32.npy: row index 37 is outside [0, 37)"));
  s = (*a)->GatherRows(std::vector<int64_t>{-1}, DType::kFloat32, out.data());
  CHECK_THAT(Message(s), Catch::Contains("row index -1"));
  s = (*a)->GatherRows(std::vector<int64_t>{0}, DType::kUInt8, out.data());
  CHECK_THAT(Message(s), Catch::Contains("cannot gather rows as uint8; use float32 or int64"));

  auto fraction = OpenNpy(Path("fraction.npy"));
  REQUIRE(fraction.ok());
  std::vector<int64_t> labels(4);
  s = (*fraction)->GatherRows(std::vector<int64_t>{0, 1, 2, 3}, DType::kInt64, labels.data());
  CHECK_THAT(Message(s), Catch::Contains("fraction.npy: row 2 element 0 (2.5) is not an integer"));
  CHECK((*fraction)->GatherRows(std::vector<int64_t>{3, 0, 1}, DType::kInt64, labels.data()).ok());
  CHECK(labels[0] == 3);
  auto too_big = OpenNpy(Path("too_big.npy"));
  REQUIRE(too_big.ok());
  s = (*too_big)->GatherRows(std::vector<int64_t>{1}, DType::kInt64, labels.data());
  CHECK_THAT(Message(s), Catch::Contains("not an integer in int64 range"));
}

TEST_CASE("CheckFinite reports the first NaN or infinity by row", "[npy]") {
  auto check = [](const char* file) {
    auto a = OpenNpy(Path(file));
    REQUIRE(a.ok());
    absl::Status s = (*a)->CheckFinite();
    REQUIRE_FALSE(s.ok());
    return Message(s);
  };
  CHECK_THAT(check("nan.npy"), Catch::EndsWith("nan.npy: row 17 element 2 is NaN"));
  CHECK_THAT(check("inf.npy"), Catch::EndsWith("inf.npy: row 33 element 1 is -inf"));
  CHECK_THAT(check("late_inf.npy"), Catch::EndsWith("late_inf.npy: row 8191 element 0 is +inf"));
}

TEST_CASE("Opening refuses other dtypes, layouts and shapes by name", "[npy]") {
  auto error = [](const char* file) {
    auto a = OpenArray(Path(file), "");
    REQUIRE_FALSE(a.ok());
    CHECK(a.status().code() == absl::StatusCode::kInvalidArgument);
    std::string m = Message(a.status());
    CHECK_THAT(m, Catch::StartsWith(Path(file)));
    return m;
  };
  CHECK_THAT(error("big_endian.npy"), Catch::Contains("unsupported dtype '>f4' (big-endian"));
  CHECK_THAT(error("float16.npy"), Catch::Contains("unsupported dtype '<f2'"));
  CHECK_THAT(error("int8.npy"), Catch::Contains("unsupported dtype '|i1'"));
  CHECK_THAT(error("unicode.npy"), Catch::Contains("'<U2' (unicode string)"));
  CHECK_THAT(error("object.npy"), Catch::Contains("'|O' (Python object)"));
  CHECK_THAT(error("structured.npy"), Catch::Contains("structured dtypes"));
  CHECK_THAT(error("fortran.npy"), Catch::Contains("fortran_order=True"));
  CHECK_THAT(error("scalar.npy"), Catch::Contains("0-d array"));
  CHECK_THAT(error("zero_rows.npy"), Catch::Contains("shape (0, 3) has zero rows"));
}

TEST_CASE("Opening refuses damaged files with expected and actual sizes", "[npy]") {
  auto error = [](const char* file, const char* key = "") {
    auto a = OpenArray(Path(file), key);
    REQUIRE_FALSE(a.ok());
    std::string m = Message(a.status());
    CHECK_THAT(m, Catch::StartsWith(Path(file)));
    return m;
  };
  CHECK_THAT(error("truncated.npy"),
             Catch::Contains("shape (37, 3, 2) of float32 needs 888 bytes of data but the file "
                             "holds 878 (truncated)"));
  CHECK_THAT(error("trailing.npy"), Catch::Contains("holds 893 (trailing bytes)"));
  CHECK_THAT(error("header_cut.npy"), Catch::Contains("truncated .npy header"));
  CHECK_THAT(error("bad_magic.npy"), Catch::Contains("not a .npy file"));
  CHECK_THAT(error("truncated.npz", "float32"), Catch::Contains("truncated"));
  CHECK_THAT(error("corrupt.npz", "float32"), Catch::Contains("entry 'float32.npy'"));
  // The other members of the damaged archive are still fine.
  auto intact = OpenNpz(Path("corrupt.npz"), "int32");
  REQUIRE(intact.ok());
  CheckAgainstNumpy(**intact, {"int32", DType::kInt32});
}

}  // namespace
}  // namespace cohort::npy
