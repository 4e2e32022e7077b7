// `cohort-worker train` with the agent's rendezvous opener: the real binary, its
// --rendezvous forms, and a coordinator whose attempt has ended.

#include <catch2/catch.hpp>

#include <vector>

#include "absl/time/clock.h"
#include "common/npy/npy_writer.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/worker/agent/fake_coordinator.h"

namespace cohort::testing {
namespace {

// A job on the committed digits model with 64 rows of zeros: enough to start training.
std::string WriteJob(const TempDir& dir) {
  std::vector<float> x(64 * 8 * 8, 0.0f);
  std::vector<int64_t> y(64, 0);
  REQUIRE(npy::WriteNpy(dir.File("x.npy"), npy::DType::kFloat32, {64, 8, 8, 1}, x.data()).ok());
  REQUIRE(npy::WriteNpy(dir.File("y.npy"), npy::DType::kInt64, {64}, y.data()).ok());
  std::string path = dir.File("job.yaml");
  WriteFile(path, std::string("model: ") + COHORT_SOURCE_DIR +
                      "/examples/digits_cnn.keras\n"
                      "data: {x: x.npy, y: y.npy}\n"
                      "fit: {epochs: 1, batch_size: 32}\n"
                      "resources: {workers: 2}\n");
  return path;
}

TEST_CASE("train refuses a --rendezvous it does not know, naming both forms", "[agent][train]") {
  TempDir dir;
  std::string job = WriteJob(dir);
  CommandResult r = RunCommand({COHORT_WORKER_BIN, "train", job, "--world", "2", "--rank", "1",
                                "--rendezvous", "http://example.com/x", "--out", dir.File("out")},
                               absl::Seconds(60));
  INFO(r.output);
  CHECK(r.status.code == 2);
  CHECK(r.output.find("file://DIR") != std::string::npos);
  CHECK(r.output.find("coordinator://HOST:PORT/JOB_ID/ATTEMPT") != std::string::npos);

  CommandResult bad = RunCommand({COHORT_WORKER_BIN, "train", job, "--world", "2", "--rank", "1",
                                  "--rendezvous", "coordinator://127.0.0.1:7070/job-1",
                                  "--out", dir.File("out")},
                                 absl::Seconds(60));
  INFO(bad.output);
  CHECK(bad.status.code == 2);
  CHECK(bad.output.find("names no job attempt") != std::string::npos);
}

TEST_CASE("a trainer whose attempt has ended fails at once", "[agent][train]") {
  FakeCoordinator coordinator;  // no namespace is open: every call answers ABORTED
  TempDir dir;
  std::string job = WriteJob(dir);
  absl::Time start = absl::Now();
  CommandResult r = RunCommand(
      {COHORT_WORKER_BIN, "train", job, "--world", "2", "--rank", "1", "--rendezvous",
       "coordinator://" + coordinator.address() + "/job-1/1", "--out", dir.File("out"),
       "--collective-timeout", "60s"},
      absl::Seconds(60));
  INFO(r.output);
  CHECK(r.status.code == 1);
  CHECK(r.output.find("has ended") != std::string::npos);
  CHECK(absl::Now() - start < absl::Seconds(30));
}

TEST_CASE("two trainers meet through the coordinator's rendezvous", "[agent][train]") {
  FakeCoordinator coordinator;
  coordinator.With([](auto& s) { s.open_namespaces.insert("job-1/1"); });
  TempDir dir;
  std::string job = WriteJob(dir);
  std::string url = "coordinator://" + coordinator.address() + "/job-1/1";
  Process rank1({COHORT_WORKER_BIN, "train", job, "--world", "2", "--rank", "1", "--rendezvous",
                 url, "--out", dir.File("out1"), "--threads", "1"},
                dir.File("rank1.log"));
  CommandResult rank0 = RunCommand({COHORT_WORKER_BIN, "train", job, "--world", "2", "--rank", "0",
                                    "--rendezvous", url, "--out", dir.File("out0"), "--threads", "1"},
                                   absl::Seconds(120));
  INFO(rank0.output);
  std::optional<ExitStatus> other = rank1.Wait(absl::Seconds(60));
  INFO(rank1.Output());
  CHECK(rank0.status.code == 0);
  REQUIRE(other.has_value());
  CHECK(other->code == 0);
  CHECK(ReadFile(dir.File("out0/model.keras")).size() > 0);
  CHECK(coordinator.With([](auto& s) { return s.keys.size(); }) >= 2);
}

}  // namespace
}  // namespace cohort::testing
