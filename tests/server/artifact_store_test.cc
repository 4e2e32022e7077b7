#include "server/artifact_store.h"

#include <catch2/catch.hpp>

#include <filesystem>

#include "common/transfer/sha256.h"
#include "tests/support/temp_dir.h"

namespace cohort::server {
namespace {

using cohort::testing::ReadFile;
using cohort::testing::TempDir;

std::string Digest(const std::string& bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.HexDigest();
}

std::unique_ptr<ArtifactStore> Store(const TempDir& dir, int64_t max_upload = 1000,
                                     int64_t max_model = 100) {
  auto store = ArtifactStore::Create(dir.path(), {.max_upload_bytes = max_upload,
                                                  .max_model_bytes = max_model});
  REQUIRE(store.ok());
  return *std::move(store);
}

TEST_CASE("Uploads are content-addressed by sha256 and extension", "[server][artifacts]") {
  TempDir dir;
  auto store = Store(dir);
  auto receiver = store->StartUpload("x.NPY", 6, Digest("abcdef"));
  REQUIRE(receiver.ok());
  REQUIRE((*receiver)->Append("abc").ok());
  REQUIRE((*receiver)->Append("def").ok());
  absl::StatusOr<v1::ArtifactInfo> info = (*receiver)->Commit();
  REQUIRE(info.ok());
  const std::string id = Digest("abcdef") + ".npy";
  CHECK(info->name() == id);
  CHECK(info->size_bytes() == 6);
  CHECK(ReadFile(dir.path() + "/artifacts/" + id) == "abcdef");
  CHECK(*store->UploadPath(id) == dir.path() + "/artifacts/" + id);
  // The same bytes again: the same artifact.
  auto again = store->StartUpload("other.npy", -1, "");
  REQUIRE((*again)->Append("abcdef").ok());
  CHECK((*again)->Commit()->name() == id);
  absl::StatusOr<v1::DataArtifact> d = store->DescribeUpload(id);
  REQUIRE(d.ok());
  CHECK(d->size_bytes() == 6);
  CHECK(d->sha256() == Digest("abcdef"));
  CHECK(std::filesystem::is_empty(dir.path() + "/incoming"));
  CHECK(*store->PutUpload("json", "{}") == Digest("{}") + ".json");
}

TEST_CASE("Uploads: bad names, unknown ids, limits and bad digests", "[server][artifacts]") {
  TempDir dir;
  auto store = Store(dir);
  CHECK(store->StartUpload("data.csv", 3, "").status().message() ==
        "header.file_name: 'data.csv' must end in .npy, .npz, .keras or .json");
  CHECK(store->UploadPath(std::string(64, 'a') + ".npy").status().code() ==
        absl::StatusCode::kNotFound);
  CHECK(store->UploadPath("../cohort.db").status().code() == absl::StatusCode::kInvalidArgument);
  absl::Status big = store->StartUpload("m.keras", 101, "").status();
  CHECK(big.code() == absl::StatusCode::kResourceExhausted);
  CHECK(big.message() ==
        "upload 'm.keras' (--max-model-bytes): 101 bytes is more than the limit of 100 bytes");
  auto undeclared = store->StartUpload("x.npz", -1, "");
  CHECK((*undeclared)->Append(std::string(1001, 'x')).code() == absl::StatusCode::kResourceExhausted);
  auto tampered = store->StartUpload("x.npy", 3, Digest("abc"));
  REQUIRE((*tampered)->Append("abd").ok());
  CHECK((*tampered)->Commit().status().code() == absl::StatusCode::kDataLoss);
  CHECK(std::filesystem::is_empty(dir.path() + "/artifacts"));
  CHECK(std::filesystem::is_empty(dir.path() + "/incoming"));
}

TEST_CASE("Job artifacts live under jobs/<id>/<name> and names cannot escape", "[server][artifacts]") {
  TempDir dir;
  auto store = Store(dir);
  auto r = store->StartJobArtifact("job-1", "checkpoints/ckpt-epoch-000003.zip", 2, "");
  REQUIRE(r.ok());
  REQUIRE((*r)->Append("zz").ok());
  absl::StatusOr<v1::ArtifactInfo> info = (*r)->Commit();
  REQUIRE(info.ok());
  CHECK(info->name() == "checkpoints/ckpt-epoch-000003.zip");
  CHECK(info->sha256() == Digest("zz"));
  CHECK(ReadFile(dir.path() + "/jobs/job-1/checkpoints/ckpt-epoch-000003.zip") == "zz");
  for (const char* bad : {"", "../x", "/etc/passwd", "a/../b", "a//b", "model keras", "a\\b",
                          "./model.keras", "a/b/c/d/e"}) {
    INFO(bad);
    CHECK(store->StartJobArtifact("job-1", bad, 1, "").status().code() ==
          absl::StatusCode::kInvalidArgument);
  }
  CHECK(store->JobArtifactPath("..", "model.keras").status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(ArtifactStore::CheckJobArtifactName("../x").message() ==
        "artifact name '../x' must not contain '', '.' or '..' parts");
}

TEST_CASE("A job artifact that its accept refuses replaces nothing and leaves nothing",
          "[server][artifacts]") {
  TempDir dir;
  auto store = Store(dir);
  const std::string path = dir.path() + "/jobs/job-1/tensorboard/events.out.tfevents.1";
  auto upload = [&](const std::string& bytes, bool accepted) {
    auto r = store->StartJobArtifact("job-1", "tensorboard/events.out.tfevents.1", -1, "");
    REQUIRE(r.ok());
    REQUIRE((*r)->Append(bytes).ok());
    return (*r)->Commit([&](const v1::ArtifactInfo& info,
                            const ArtifactStore::Receiver::Publish& publish) -> absl::Status {
      CHECK(info.size_bytes() == static_cast<int64_t>(bytes.size()));
      if (!accepted) return absl::FailedPreconditionError("attempt 1 is no longer the job's");
      return publish();
    });
  };
  REQUIRE(upload("first", true).ok());
  CHECK(ReadFile(path) == "first");
  absl::StatusOr<v1::ArtifactInfo> refused = upload("second, longer", false);
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(ReadFile(path) == "first");  // the record of "first" still describes the file
  CHECK(std::filesystem::is_empty(dir.path() + "/incoming"));
  REQUIRE(upload("third", true).ok());
  CHECK(ReadFile(path) == "third");
}

}  // namespace
}  // namespace cohort::server
