// common/transfer: SHA-256 and the checked ReceivedFile.

#include <catch2/catch.hpp>

#include <filesystem>

#include "common/transfer/file_chunks.h"
#include "common/transfer/sha256.h"
#include "tests/support/temp_dir.h"

namespace cohort {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

constexpr const char* kAbcDigest =
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

TEST_CASE("Sha256 of a known string and of a file", "[transfer]") {
  Sha256 hash;
  hash.Update("a");
  hash.Update("bc");
  CHECK(hash.HexDigest() == kAbcDigest);
  TempDir dir;
  WriteFile(dir.File("abc"), "abc");
  CHECK(*Sha256OfFile(dir.File("abc")) == kAbcDigest);
  CHECK(Sha256OfFile(dir.File("missing")).status().code() == absl::StatusCode::kNotFound);
  CHECK(IsSha256Hex(kAbcDigest));
  CHECK_FALSE(IsSha256Hex("ABC"));
}

TEST_CASE("ReceivedFile commits a checked file", "[transfer]") {
  TempDir dir;
  auto file = ReceivedFile::Create(dir.File("out"), {.what = "t", .size = 3, .sha256 = kAbcDigest});
  REQUIRE(file.ok());
  REQUIRE((*file)->Append("ab").ok());
  CHECK_FALSE(std::filesystem::exists(dir.File("out")));
  REQUIRE((*file)->Append("c").ok());
  absl::StatusOr<std::string> digest = (*file)->Commit();
  REQUIRE(digest.ok());
  CHECK(*digest == kAbcDigest);
  CHECK(ReadFile(dir.File("out")) == "abc");
}

TEST_CASE("ReceivedFile leaves nothing after a size or digest mismatch", "[transfer]") {
  TempDir dir;
  const std::string out = dir.File("out");
  {
    auto file = ReceivedFile::Create(out, {.what = "short", .size = 4});
    REQUIRE((*file)->Append("abc").ok());
    CHECK((*file)->Commit().status().code() == absl::StatusCode::kInvalidArgument);
  }
  {
    auto file = ReceivedFile::Create(out, {.what = "long", .size = 2});
    CHECK((*file)->Append("abc").code() == absl::StatusCode::kInvalidArgument);
  }
  {
    auto file = ReceivedFile::Create(out, {.what = "big", .max_bytes = 2});
    absl::Status s = (*file)->Append("abc");
    CHECK(s.code() == absl::StatusCode::kResourceExhausted);
    CHECK(s.message() == "big: more than the limit of 2 bytes");
  }
  CHECK(ReceivedFile::Create(out, {.what = "declared", .size = 10, .max_bytes = 5})
            .status()
            .code() == absl::StatusCode::kResourceExhausted);
  {
    auto file = ReceivedFile::Create(out, {.what = "tampered", .sha256 = kAbcDigest});
    REQUIRE((*file)->Append("abd").ok());
    CHECK((*file)->Commit().status().code() == absl::StatusCode::kDataLoss);
  }
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("SendFileChunks sends from an offset", "[transfer]") {
  TempDir dir;
  WriteFile(dir.File("f"), "hello world");
  std::string got;
  int64_t total = 0;
  REQUIRE(SendFileChunks(dir.File("f"), 6, [&](absl::string_view d, int64_t offset, int64_t t) {
            CHECK(offset == 6 + static_cast<int64_t>(got.size()));
            got.append(d.data(), d.size());
            total = t;
            return true;
          }).ok());
  CHECK(got == "world");
  CHECK(total == 11);
  CHECK(SendFileChunks(dir.File("f"), 12, [](auto, auto, auto) { return true; }).code() ==
        absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace cohort
