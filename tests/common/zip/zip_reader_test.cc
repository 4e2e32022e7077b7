#include "common/zip/zip_reader.h"

#include <map>
#include <random>

#include <catch2/catch.hpp>

#include "tests/common/zip/python.h"
#include "tests/support/temp_dir.h"

namespace cohort::zip {
namespace {

using testing::ReadFile;
using testing::RunPython;
using testing::TempDir;

constexpr const char* kHelper = "tests/common/zip/zip_helper.py";

// The entries zip_helper.py writes into most fixtures.
std::map<std::string, std::string> Expected() {
  std::string b;
  for (int i = 0; i < 100; ++i) {
    for (int c = 0; c < 256; ++c) b.push_back(static_cast<char>(c));
  }
  return {{"a.txt", "hello"}, {"dir/b.bin", b}, {"empty", ""}};
}

// One fixture directory per test process.
const TempDir& Fixtures() {
  static TempDir dir;
  static bool made = false;
  if (!made) {
    RunPython(kHelper, {"fixtures", dir.path()});
    made = true;
  }
  return dir;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

void CheckExpectedEntries(const ZipReader& zip, Method method) {
  auto expected = Expected();
  REQUIRE(zip.entries().size() == expected.size());
  for (const ZipEntry& e : zip.entries()) {
    INFO(e.name);
    REQUIRE(expected.count(e.name) == 1);
    CHECK(e.method == method);
    CHECK(e.uncompressed_size == expected[e.name].size());
    auto data = zip.Read(e);
    REQUIRE(data.ok());
    CHECK(*data == expected[e.name]);
  }
}

TEST_CASE("ZipReader reads stored and deflated archives written by zipfile", "[zip]") {
  for (const char* name : {"stored.zip", "deflate.zip", "comment.zip", "descriptor.zip", "zip64.zip"}) {
    INFO(name);
    auto zip = ZipReader::Open(Fixtures().File(name));
    REQUIRE(zip.ok());
    bool stored = std::string(name) == "stored.zip" || std::string(name) == "zip64.zip";
    CheckExpectedEntries(**zip, stored ? Method::kStored : Method::kDeflate);
  }
}

TEST_CASE("ZipReader gives the file offset of a stored entry's bytes", "[zip]") {
  std::string file = ReadFile(Fixtures().File("zip64.zip"));
  auto zip = ZipReader::Open(Fixtures().File("zip64.zip"));
  REQUIRE(zip.ok());
  for (const auto& [name, contents] : Expected()) {
    const ZipEntry* e = (*zip)->Find(name);
    REQUIRE(e != nullptr);
    CHECK(file.substr(e->data_offset, e->uncompressed_size) == contents);
  }
  CHECK((*zip)->Find("missing") == nullptr);
}

TEST_CASE("ZipReader inflates a multi-megabyte entry", "[zip]") {
  auto zip = ZipReader::Open(Fixtures().File("big.zip"));
  REQUIRE(zip.ok());
  auto data = (*zip)->Read("big.bin");
  REQUIRE(data.ok());
  CHECK(*data == ReadFile(Fixtures().File("big.bin")));
  auto missing = (*zip)->Read("nope");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(Message(missing.status()), Catch::Contains("big.bin, a.txt"));
}

TEST_CASE("ZipReader opens an archive held in memory", "[zip]") {
  auto zip = ZipReader::FromBuffer(ReadFile(Fixtures().File("deflate.zip")), "mem.zip");
  REQUIRE(zip.ok());
  CheckExpectedEntries(**zip, Method::kDeflate);
  CHECK((*zip)->name() == "mem.zip");
}

TEST_CASE("ZipReader refuses unsupported and encrypted entries at Read", "[zip]") {
  auto bzip2 = ZipReader::Open(Fixtures().File("bzip2.zip"));
  REQUIRE(bzip2.ok());
  auto read = (*bzip2)->Read("a.txt");
  REQUIRE_FALSE(read.ok());
  CHECK_THAT(Message(read.status()), Catch::Contains("bzip2.zip") && Catch::Contains("'a.txt'") &&
                                         Catch::Contains("method 12 (bzip2) is not supported"));
  auto encrypted = ZipReader::Open(Fixtures().File("encrypted.zip"));
  REQUIRE(encrypted.ok());
  read = (*encrypted)->Read("a.txt");
  REQUIRE_FALSE(read.ok());
  CHECK_THAT(Message(read.status()), Catch::Contains("encrypted"));
}

TEST_CASE("ZipReader refuses unsafe and repeated entry names", "[zip]") {
  auto traversal = ZipReader::Open(Fixtures().File("traversal.zip"));
  REQUIRE_FALSE(traversal.ok());
  CHECK_THAT(Message(traversal.status()),
             Catch::Contains("traversal.zip") && Catch::Contains("'../evil.txt' contains '..'"));
  auto absolute = ZipReader::Open(Fixtures().File("absolute.zip"));
  REQUIRE_FALSE(absolute.ok());
  CHECK_THAT(Message(absolute.status()), Catch::Contains("'/etc/evil' is an absolute path"));
  auto duplicate = ZipReader::Open(Fixtures().File("duplicate.zip"));
  REQUIRE_FALSE(duplicate.ok());
  CHECK_THAT(Message(duplicate.status()), Catch::Contains("'same': appears twice"));
}

TEST_CASE("ZipReader detects a corrupted stored entry by its CRC", "[zip]") {
  std::string bytes = ReadFile(Fixtures().File("stored.zip"));
  auto clean = ZipReader::FromBuffer(bytes, "x");
  REQUIRE(clean.ok());
  const ZipEntry* e = (*clean)->Find("dir/b.bin");
  REQUIRE(e != nullptr);
  bytes[e->data_offset + 1000] ^= 0x40;
  auto zip = ZipReader::FromBuffer(bytes, "stored.zip");
  REQUIRE(zip.ok());
  auto read = (*zip)->Read("dir/b.bin");
  REQUIRE_FALSE(read.ok());
  CHECK_THAT(Message(read.status()), Catch::Contains("stored.zip: entry 'dir/b.bin': CRC-32 mismatch"));
}

TEST_CASE("ZipReader detects corrupted deflate data", "[zip]") {
  std::string bytes = ReadFile(Fixtures().File("deflate.zip"));
  auto clean = ZipReader::FromBuffer(bytes, "x");
  REQUIRE(clean.ok());
  const ZipEntry* e = (*clean)->Find("dir/b.bin");
  REQUIRE(e != nullptr);
  std::string original = Expected()["dir/b.bin"];
  int detected = 0;
  for (uint64_t i = 0; i < e->compressed_size; ++i) {
    std::string bad = bytes;
    bad[e->data_offset + i] ^= 0x5A;
    auto zip = ZipReader::FromBuffer(bad, "deflate.zip");
    REQUIRE(zip.ok());
    auto read = (*zip)->Read("dir/b.bin");
    // Either caught, or a flip that changes nothing (padding bits, an equivalent
    // back-reference in this periodic data): never different bytes.
    if (read.ok()) {
      CHECK(*read == original);
    } else {
      ++detected;
      CHECK_THAT(Message(read.status()), Catch::StartsWith("deflate.zip: entry 'dir/b.bin': "));
    }
  }
  CHECK(detected > static_cast<int>(e->compressed_size) / 2);
}

TEST_CASE("ZipReader refuses every truncation of an archive", "[zip]") {
  std::string bytes = ReadFile(Fixtures().File("deflate.zip"));
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto zip = ZipReader::FromBuffer(bytes.substr(0, n), "cut.zip");
    REQUIRE_FALSE(zip.ok());
    CHECK_THAT(Message(zip.status()), Catch::StartsWith("cut.zip: "));
  }
  auto truncated = ZipReader::FromBuffer(bytes.substr(0, bytes.size() / 2), "cut.zip");
  CHECK_THAT(Message(truncated.status()), Catch::Contains("truncated"));
}

TEST_CASE("ZipReader refuses sizes and offsets that do not fit the file", "[zip]") {
  // Drop bytes from the middle of the data: the central directory, kept whole, then
  // points past where things are.
  std::string bytes = ReadFile(Fixtures().File("stored.zip"));
  std::string cut = bytes.substr(0, 100) + bytes.substr(200);
  auto zip = ZipReader::FromBuffer(cut, "cut.zip");
  REQUIRE_FALSE(zip.ok());
  CHECK_THAT(Message(zip.status()), Catch::StartsWith("cut.zip: "));

  // A deflated entry declaring a size no deflate stream can reach.
  std::string deflated = ReadFile(Fixtures().File("deflate.zip"));
  size_t central = deflated.find("PK\x01\x02");
  REQUIRE(central != std::string::npos);
  deflated[central + 24 + 3] = 0x7F;  // the uncompressed size's top byte
  auto bomb = ZipReader::FromBuffer(deflated, "bomb.zip");
  REQUIRE_FALSE(bomb.ok());
  CHECK_THAT(Message(bomb.status()), Catch::Contains("more than deflate can expand"));
}

TEST_CASE("ZipReader says what is wrong with files that are no zip", "[zip]") {
  TempDir dir;
  testing::WriteFile(dir.File("empty.zip"), "");
  testing::WriteFile(dir.File("text.zip"), std::string(1000, 'x'));
  for (const char* name : {"empty.zip", "text.zip"}) {
    auto zip = ZipReader::Open(dir.File(name));
    REQUIRE_FALSE(zip.ok());
    CHECK_THAT(Message(zip.status()), Catch::Contains(name) && Catch::Contains("not a zip file"));
  }
  auto missing = ZipReader::Open(dir.File("missing.zip"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("ZipReader survives random corruption", "[zip]") {
  std::vector<std::string> originals = {ReadFile(Fixtures().File("deflate.zip")),
                                        ReadFile(Fixtures().File("zip64.zip")),
                                        ReadFile(Fixtures().File("descriptor.zip"))};
  std::mt19937_64 rng(42);
  int opened = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string bytes = originals[round % originals.size()];
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    auto zip = ZipReader::FromBuffer(bytes, "fuzz.zip");
    if (!zip.ok()) continue;
    ++opened;
    for (const ZipEntry& e : (*zip)->entries()) (void)(*zip)->Read(e);
  }
  CHECK(opened > 0);  // the corruption also hit data, not only structure
}

}  // namespace
}  // namespace cohort::zip
