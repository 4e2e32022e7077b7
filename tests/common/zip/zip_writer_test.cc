#include "common/zip/zip_writer.h"

#include <filesystem>
#include <random>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/zip/zip_reader.h"
#include "tests/common/zip/python.h"
#include "tests/support/temp_dir.h"

namespace cohort::zip {
namespace {

using testing::ReadFile;
using testing::RunPython;
using testing::TempDir;
using testing::WriteFile;

constexpr const char* kHelper = "tests/common/zip/zip_helper.py";

std::string Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

struct Member {
  std::string name;
  std::string data;
  Method method;
};

std::vector<Member> Members() {
  std::string text;
  for (int i = 0; i < 5000; ++i) absl::StrAppend(&text, "line ", i, "\n");
  return {{"config.json", "{\"a\": 1}", Method::kStored},
          {"text.txt", text, Method::kDeflate},
          {"empty_stored", "", Method::kStored},
          {"empty_deflated", "", Method::kDeflate},
          {"assets/random.bin", Random(1 << 20, 1), Method::kDeflate},
          {"model.weights.h5", Random(70000, 2), Method::kStored},
          {"\xc3\xa9t\xc3\xa9.txt", "utf-8 name", Method::kStored}};
}

void Write(const std::string& path, const std::vector<Member>& members,
           ZipWriter::Options options = {}) {
  auto writer = ZipWriter::Create(path, options);
  REQUIRE(writer.ok());
  for (const Member& m : members) REQUIRE((*writer)->Add(m.name, m.data, m.method).ok());
  REQUIRE((*writer)->Finish().ok());
}

// What zip_helper.py check prints for `members`, after testzip() passed.
std::string PythonListing(const std::vector<Member>& members, const ZipReader& ours) {
  std::string out = absl::StrCat("testzip ok\ncount ", members.size(), "\n");
  for (const Member& m : members) {
    const ZipEntry* e = ours.Find(m.name);
    REQUIRE(e != nullptr);
    absl::StrAppend(&out, m.name, "\t", static_cast<int>(m.method), "\t", m.data.size(), "\t",
                    absl::Hex(e->crc32, absl::kZeroPad8), "\n");
  }
  return out;
}

void CheckReadBack(const std::string& path, const std::vector<Member>& members) {
  auto zip = ZipReader::Open(path);
  REQUIRE(zip.ok());
  REQUIRE((*zip)->entries().size() == members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    const ZipEntry& e = (*zip)->entries()[i];
    CHECK(e.name == members[i].name);
    CHECK(e.method == members[i].method);
    auto data = (*zip)->Read(e);
    REQUIRE(data.ok());
    CHECK(*data == members[i].data);
  }
  CHECK(RunPython(kHelper, {"check", path}) == PythonListing(members, **zip));
}

TEST_CASE("ZipWriter output is read by Python's zipfile and by ZipReader", "[zip]") {
  TempDir dir;
  Write(dir.File("out.zip"), Members());
  CheckReadBack(dir.File("out.zip"), Members());
  // Stored data sits in place, where a caller may map it.
  auto zip = ZipReader::Open(dir.File("out.zip"));
  REQUIRE(zip.ok());
  const ZipEntry* weights = (*zip)->Find("model.weights.h5");
  REQUIRE(weights != nullptr);
  CHECK(ReadFile(dir.File("out.zip")).substr(weights->data_offset, 70000) == Random(70000, 2));
}

TEST_CASE("ZipWriter writes ZIP64 records that zipfile reads", "[zip]") {
  TempDir dir;
  ZipWriter::Options options;
  options.force_zip64 = true;
  Write(dir.File("zip64.zip"), Members(), options);
  CheckReadBack(dir.File("zip64.zip"), Members());
  CHECK(ReadFile(dir.File("zip64.zip")).find("PK\x06\x06") != std::string::npos);
}

TEST_CASE("ZipWriter switches to ZIP64 past 65535 entries", "[zip]") {
  TempDir dir;
  std::string path = dir.File("many.zip");
  constexpr int kCount = 70000;
  {
    auto writer = ZipWriter::Create(path);
    REQUIRE(writer.ok());
    for (int i = 0; i < kCount; ++i) {
      REQUIRE((*writer)->Add(absl::StrCat("e", i), absl::StrCat(i), Method::kStored).ok());
    }
    REQUIRE((*writer)->Finish().ok());
  }
  auto zip = ZipReader::Open(path);
  REQUIRE(zip.ok());
  REQUIRE((*zip)->entries().size() == kCount);
  CHECK(*(*zip)->Read("e69999") == "69999");
  CHECK(RunPython(kHelper, {"check", path}) == absl::StrCat("testzip ok\ncount ", kCount, "\n"));
}

TEST_CASE("ZipWriter leaves nothing at the path until Finish", "[zip]") {
  TempDir dir;
  std::string path = dir.File("out.zip");
  WriteFile(path, "previous");
  {
    auto writer = ZipWriter::Create(path);
    REQUIRE(writer.ok());
    REQUIRE((*writer)->Add("a", "1", Method::kStored).ok());
    CHECK(ReadFile(path) == "previous");
  }  // destroyed without Finish
  CHECK(ReadFile(path) == "previous");
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                      std::filesystem::directory_iterator()) == 1);
}

TEST_CASE("ZipWriter refuses bad names, and is dead after an error", "[zip]") {
  TempDir dir;
  for (const char* bad : {"../up", "a/../../up", "/abs", "C:/win", "dir/", ""}) {
    INFO(bad);
    std::string path = dir.File("bad.zip");
    auto writer = ZipWriter::Create(path);
    REQUIRE(writer.ok());
    absl::Status s = (*writer)->Add(bad, "x", Method::kStored);
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::StartsWith(path));
    CHECK((*writer)->Add("fine", "x", Method::kStored) == s);
    CHECK((*writer)->Finish() == s);
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK(std::filesystem::is_empty(dir.path()));
  }
  auto writer = ZipWriter::Create(dir.File("dup.zip"));
  REQUIRE(writer.ok());
  REQUIRE((*writer)->Add("same", "1", Method::kStored).ok());
  absl::Status dup = (*writer)->Add("same", "2", Method::kDeflate);
  CHECK_THAT(std::string(dup.message()), Catch::Contains("'same' added twice"));
  absl::Status method = ZipWriter::Create(dir.File("m.zip")).value()->Add("a", "", Method{12});
  CHECK_THAT(std::string(method.message()), Catch::Contains("cannot write compression method 12"));
}

TEST_CASE("ZipWriter rewrites a real .keras file that Keras then loads", "[zip][keras]") {
  TempDir dir;
  RunPython(kHelper, {"keras_save", dir.path()});
  auto original = ZipReader::Open(dir.File("model.keras"));
  REQUIRE(original.ok());
  std::vector<std::string> names;
  for (const ZipEntry& e : (*original)->entries()) {
    names.push_back(e.name);
    CHECK(e.method == Method::kStored);  // Keras itself stores
  }
  CHECK(names == std::vector<std::string>{"metadata.json", "config.json", "model.weights.h5"});
  std::vector<std::string> paths;
  for (Method method : {Method::kStored, Method::kDeflate}) {
    std::string path = dir.File(absl::StrCat("rewritten_", MethodName(method), ".keras"));
    paths.push_back(path);
    auto writer = ZipWriter::Create(path);
    REQUIRE(writer.ok());
    for (const ZipEntry& e : (*original)->entries()) {
      auto data = (*original)->Read(e);
      REQUIRE(data.ok());
      REQUIRE((*writer)->Add(e.name, *data, method).ok());
    }
    REQUIRE((*writer)->Finish().ok());
  }
  std::string loaded = RunPython(kHelper, {"keras_load", dir.path(), paths[0], paths[1]});
  CHECK(loaded == absl::StrCat("keras loaded ", paths[0], "\nkeras loaded ", paths[1], "\n"));
}

}  // namespace
}  // namespace cohort::zip
