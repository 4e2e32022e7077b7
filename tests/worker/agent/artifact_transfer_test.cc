#include "worker/agent/artifact_transfer.h"

#include <catch2/catch.hpp>

#include <filesystem>

#include "common/transfer/sha256.h"
#include "tests/support/temp_dir.h"
#include "tests/worker/agent/fake_coordinator.h"

namespace cohort::agent {
namespace {

std::string Hex(const std::string& bytes) {
  Sha256 sha;
  sha.Update(bytes);
  return sha.HexDigest();
}

v1::DataArtifact Describe(const std::string& bytes, const std::string& ext = ".npy") {
  v1::DataArtifact a;
  a.set_artifact_id(Hex(bytes) + ext);
  a.set_size_bytes(static_cast<int64_t>(bytes.size()));
  a.set_sha256(Hex(bytes));
  return a;
}

// Names in `dir` (temporary files included).
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    names.push_back(e.path().filename().string());
  }
  return names;
}

TEST_CASE("data is fetched in chunks, checked, and cached", "[agent][transfer]") {
  testing::FakeCoordinator coordinator;
  testing::TempDir dir;
  std::string bytes(4500, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  v1::DataArtifact artifact = Describe(bytes);
  coordinator.With([&](auto& s) { s.data[artifact.artifact_id()] = bytes; });
  auto stub = coordinator.WorkerStub();
  DataCache cache(dir.File("cache"), stub.get());

  absl::StatusOr<std::string> path = cache.Fetch(artifact);
  REQUIRE(path.ok());
  CHECK(*path == dir.File("cache/" + artifact.artifact_id()));
  CHECK(testing::ReadFile(*path) == bytes);
  CHECK(coordinator.With([&](auto& s) { return s.fetches[artifact.artifact_id()]; }) == 1);

  // A second job with the same artifact uses the cached file.
  DataCache again(dir.File("cache"), stub.get());
  REQUIRE(again.Fetch(artifact).ok());
  CHECK(coordinator.With([&](auto& s) { return s.fetches[artifact.artifact_id()]; }) == 1);

  // A damaged cached file (wrong size) is fetched again.
  testing::WriteFile(*path, "short");
  REQUIRE(again.Fetch(artifact).ok());
  CHECK(testing::ReadFile(*path) == bytes);
  CHECK(coordinator.With([&](auto& s) { return s.fetches[artifact.artifact_id()]; }) == 2);
}

TEST_CASE("a sha256 mismatch leaves nothing in the cache", "[agent][transfer]") {
  testing::FakeCoordinator coordinator;
  testing::TempDir dir;
  std::string bytes(2500, 'x');
  v1::DataArtifact artifact = Describe(bytes);
  std::string tampered = bytes;
  tampered[1234] = 'y';
  coordinator.With([&](auto& s) { s.data[artifact.artifact_id()] = tampered; });
  auto stub = coordinator.WorkerStub();
  DataCache cache(dir.File("cache"), stub.get());
  absl::StatusOr<std::string> path = cache.Fetch(artifact);
  REQUIRE_FALSE(path.ok());
  CHECK(path.status().code() == absl::StatusCode::kDataLoss);
  CHECK(path.status().message().find(artifact.artifact_id()) != std::string::npos);
  CHECK(Entries(dir.File("cache")).empty());
}

TEST_CASE("a short or missing artifact is an error that names it", "[agent][transfer]") {
  testing::FakeCoordinator coordinator;
  testing::TempDir dir;
  std::string bytes(3000, 'z');
  v1::DataArtifact artifact = Describe(bytes);
  coordinator.With([&](auto& s) { s.data[artifact.artifact_id()] = bytes.substr(0, 2000); });
  auto stub = coordinator.WorkerStub();
  DataCache cache(dir.File("cache"), stub.get());
  absl::StatusOr<std::string> short_fetch = cache.Fetch(artifact);
  REQUIRE_FALSE(short_fetch.ok());
  CHECK(Entries(dir.File("cache")).empty());

  v1::DataArtifact unknown = Describe("never uploaded");
  absl::StatusOr<std::string> missing = cache.Fetch(unknown);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(missing.status().message().find(unknown.artifact_id()) != std::string::npos);

  v1::DataArtifact evil = artifact;
  evil.set_artifact_id("../../etc/passwd");
  CHECK(cache.Fetch(evil).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a cancelled fetch ends at once", "[agent][transfer]") {
  testing::FakeCoordinator coordinator;
  testing::TempDir dir;
  std::string bytes(3000, 'q');
  v1::DataArtifact artifact = Describe(bytes);
  coordinator.With([&](auto& s) { s.data[artifact.artifact_id()] = bytes; });
  auto stub = coordinator.WorkerStub();
  DataCache cache(dir.File("cache"), stub.get());
  CallCanceller canceller;
  canceller.Cancel();
  absl::StatusOr<std::string> path = cache.Fetch(artifact, &canceller);
  REQUIRE_FALSE(path.ok());
  CHECK(Entries(dir.File("cache")).empty());
}

TEST_CASE("uploads carry the name, size and sha256 and downloads are size-checked",
          "[agent][transfer]") {
  testing::FakeCoordinator coordinator;
  testing::TempDir dir;
  auto stub = coordinator.WorkerStub();
  auto jobs = coordinator.JobStub();
  v1::RankRef rank;
  rank.set_job_id("job-1");
  rank.set_attempt(1);
  std::string model(2600, 'm');
  testing::WriteFile(dir.File("model.keras"), model);
  testing::WriteFile(dir.File("empty.json"), "");
  REQUIRE(UploadArtifact(stub.get(), rank, "model.keras", dir.File("model.keras")).ok());
  REQUIRE(UploadArtifact(stub.get(), rank, "history.json", dir.File("empty.json")).ok());
  CHECK(coordinator.With([](auto& s) { return s.uploads["model.keras"]; }) == model);
  CHECK(coordinator.With([](auto& s) { return s.uploads.count("history.json"); }) == 1);
  absl::Status missing = UploadArtifact(stub.get(), rank, "model.keras", dir.File("nope"));
  CHECK_FALSE(missing.ok());
  CHECK(missing.message().find("model.keras") != std::string::npos);

  std::string ckpt(3100, 'c');
  coordinator.With([&](auto& s) { s.job_artifacts["job-1/checkpoints/ckpt-epoch-000002.zip"] = ckpt; });
  REQUIRE(DownloadJobArtifact(jobs.get(), "job-1", "checkpoints/ckpt-epoch-000002.zip",
                              dir.File("ckpt.zip"))
              .ok());
  CHECK(testing::ReadFile(dir.File("ckpt.zip")) == ckpt);
  absl::Status absent =
      DownloadJobArtifact(jobs.get(), "job-1", "checkpoints/none.zip", dir.File("none.zip"));
  CHECK(absent.code() == absl::StatusCode::kNotFound);
  CHECK_FALSE(std::filesystem::exists(dir.File("none.zip")));
}

}  // namespace
}  // namespace cohort::agent
