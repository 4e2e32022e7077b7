#include "common/zip/mapped_file.h"

#include <catch2/catch.hpp>

#include "tests/support/temp_dir.h"

namespace cohort {
namespace {

using testing::TempDir;
using testing::WriteFile;

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + i / 251);
  return s;
}

TEST_CASE("MappedFile maps a whole file and any byte range of it", "[mapped_file]") {
  TempDir dir;
  std::string contents = Pattern(20000);
  WriteFile(dir.File("f"), contents);
  auto whole = MappedFile::Open(dir.File("f"));
  REQUIRE(whole.ok());
  CHECK((*whole)->view() == contents);
  // Offsets off page boundaries, across one, and at the very end.
  for (uint64_t offset : {0, 1, 4095, 4096, 4097, 12345, 19990, 20000}) {
    uint64_t length = std::min<uint64_t>(10, 20000 - offset);
    auto range = MappedFile::OpenRange(dir.File("f"), offset, length);
    REQUIRE(range.ok());
    CHECK((*range)->view() == absl::string_view(contents).substr(offset, length));
  }
}

TEST_CASE("MappedFile refuses ranges past the end and missing files", "[mapped_file]") {
  TempDir dir;
  WriteFile(dir.File("f"), "0123456789");
  auto past = MappedFile::OpenRange(dir.File("f"), 5, 6);
  REQUIRE_FALSE(past.ok());
  CHECK(past.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(past.status().message()), Catch::Contains("past the end"));
  auto huge = MappedFile::OpenRange(dir.File("f"), ~uint64_t{0}, 2);
  CHECK_FALSE(huge.ok());
  auto missing = MappedFile::Open(dir.File("missing"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  auto directory = MappedFile::Open(dir.path());
  CHECK_FALSE(directory.ok());
}

TEST_CASE("MappedFile of an empty file is an empty view", "[mapped_file]") {
  TempDir dir;
  WriteFile(dir.File("empty"), "");
  auto map = MappedFile::Open(dir.File("empty"));
  REQUIRE(map.ok());
  CHECK((*map)->size() == 0);
}

}  // namespace
}  // namespace cohort
