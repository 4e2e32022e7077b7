#include "common/zip/atomic_file.h"

#include <unistd.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "tests/support/temp_dir.h"

namespace cohort {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

TEST_CASE("AtomicFile appears only on Commit and replaces the old file", "[atomic_file]") {
  TempDir dir;
  std::string path = dir.File("out.bin");
  WriteFile(path, "old");
  auto file = AtomicFile::Create(path);
  REQUIRE(file.ok());
  std::string temp;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    std::string name = entry.path().filename().string();
    if (name.rfind(absl::StrCat("out.bin.tmp-", getpid(), "-"), 0) == 0) temp = entry.path().string();
  }
  REQUIRE_FALSE(temp.empty());
  REQUIRE((*file)->Append("new ").ok());
  REQUIRE((*file)->Append("contents").ok());
  CHECK((*file)->size() == 12);
  CHECK(std::filesystem::exists(temp));
  CHECK(ReadFile(path) == "old");
  REQUIRE((*file)->Commit().ok());
  CHECK(ReadFile(path) == "new contents");
  CHECK_FALSE(std::filesystem::exists(temp));
  CHECK((*file)->Append("x").code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("AtomicFile destroyed uncommitted leaves nothing behind", "[atomic_file]") {
  TempDir dir;
  std::string path = dir.File("out.bin");
  WriteFile(path, "old");
  {
    auto file = AtomicFile::Create(path);
    REQUIRE(file.ok());
    REQUIRE((*file)->Append("partial").ok());
  }
  CHECK(ReadFile(path) == "old");
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                      std::filesystem::directory_iterator()) == 1);
}

TEST_CASE("Two AtomicFiles of one path in one process each write whole and the last Commit wins",
          "[atomic_file]") {
  TempDir dir;
  std::string path = dir.File("out.bin");
  auto first = AtomicFile::Create(path);
  auto second = AtomicFile::Create(path);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  REQUIRE((*first)->Append("first").ok());
  REQUIRE((*second)->Append("second").ok());
  REQUIRE((*first)->Commit().ok());
  CHECK(ReadFile(path) == "first");
  REQUIRE((*second)->Commit().ok());
  CHECK(ReadFile(path) == "second");
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                      std::filesystem::directory_iterator()) == 1);
}

TEST_CASE("AtomicFile in a missing directory fails with the path", "[atomic_file]") {
  TempDir dir;
  auto file = AtomicFile::Create(dir.File("no/such/dir/out.bin"));
  REQUIRE_FALSE(file.ok());
  CHECK(file.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(file.status().message()), Catch::Contains("no/such/dir/out.bin"));
}

}  // namespace
}  // namespace cohort
