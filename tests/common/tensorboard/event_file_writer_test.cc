// The event writer against TensorBoard's own reader (read_events.py in the project
// venv): every scalar at every step, the file name, a readable prefix after a crash.

#include "common/tensorboard/event_file_writer.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/common/zip/python.h"
#include "tests/support/temp_dir.h"

namespace cohort::tensorboard {
namespace {

using cohort::testing::ReadFile;
using cohort::testing::RunPython;
using cohort::testing::TempDir;
namespace fs = std::filesystem;

nlohmann::json ReadEvents(const std::string& logdir) {
  return nlohmann::json::parse(RunPython("tests/common/tensorboard/read_events.py", {logdir}))["runs"];
}

std::vector<std::string> EventFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
  return files;
}

TEST_CASE("TensorBoard's reader finds every scalar at every step", "[tensorboard][python]") {
  TempDir tmp;
  ManualClock clock(absl::FromUnixSeconds(1'700'000'000));
  {
    auto train = EventFileWriter::Create(tmp.File("logs/train"), clock);
    auto validation = EventFileWriter::Create(tmp.File("logs/validation"), clock);
    REQUIRE(train.ok());
    REQUIRE(validation.ok());
    for (int step = 0; step < 120; ++step) {
      clock.Advance(absl::Milliseconds(250));
      (*train)->AddScalars(step, {{"batch_loss", 1.0f / (step + 1)}, {"batch_learning_rate", 0.01f}});
      if (step % 40 == 39) {
        int epoch = step / 40;
        (*train)->AddScalars(epoch, {{"epoch_loss", 0.5f - epoch * 0.1f}, {"epoch_accuracy", 0.5f + epoch * 0.1f}});
        (*validation)->AddScalar(epoch, "epoch_loss", 0.6f - epoch * 0.1f);
        REQUIRE((*train)->Flush().ok());
        REQUIRE((*validation)->Flush().ok());
      }
    }
  }
  nlohmann::json runs = ReadEvents(tmp.File("logs"));
  REQUIRE(runs.size() == 2);
  const nlohmann::json& train = runs["train"];
  CHECK(train["file_version"] == 2.0);
  REQUIRE(train["scalars"]["batch_loss"].size() == 120);
  for (int step = 0; step < 120; ++step) {
    const nlohmann::json& p = train["scalars"]["batch_loss"][step];
    CHECK(p[0] == step);
    CHECK(p[1].get<double>() == Approx(1.0 / (step + 1)).epsilon(1e-6));
    CHECK(p[2].get<double>() == Approx(1'700'000'000.0 + 0.25 * (step + 1)).margin(1e-3));
    CHECK(train["scalars"]["batch_learning_rate"][step][1].get<double>() == Approx(0.01));
  }
  REQUIRE(train["scalars"]["epoch_accuracy"].size() == 3);
  CHECK(train["scalars"]["epoch_accuracy"][2][0] == 2);
  CHECK(train["scalars"]["epoch_accuracy"][2][1].get<double>() == Approx(0.7));
  REQUIRE(runs["validation"]["scalars"]["epoch_loss"].size() == 3);
  CHECK(runs["validation"]["scalars"]["epoch_loss"][1][1].get<double>() == Approx(0.5));
}

TEST_CASE("Event files are named as TensorFlow names them", "[tensorboard]") {
  TempDir tmp;
  ManualClock clock(absl::FromUnixSeconds(1'700'000'123));
  auto a = EventFileWriter::Create(tmp.path(), clock);
  auto b = EventFileWriter::Create(tmp.path(), clock);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK((*a)->path() != (*b)->path());
  std::regex name(R"(events\.out\.tfevents\.1700000123\.[^/]+\.(\d+)\.(\d+))");
  for (const std::string& file : EventFiles(tmp.path())) {
    std::smatch m;
    INFO(file);
    REQUIRE(std::regex_match(file, m, name));
    CHECK(m[1] == std::to_string(getpid()));
  }
  // The file_version record is on disk before anything is flushed.
  CHECK(fs::file_size((*a)->path()) == 8 + 4 + (9 + 2 + 13) + 4);
}

TEST_CASE("A crash leaves a file TensorBoard reads up to the last flush", "[tensorboard][python]") {
  TempDir tmp;
  std::string dir = tmp.File("crashed");
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto w = EventFileWriter::Create(dir);
    if (!w.ok()) _exit(3);
    for (int step = 0; step < 10; ++step) (*w)->AddScalar(step, "loss", static_cast<float>(step));
    if (!(*w)->Flush().ok()) _exit(4);
    for (int step = 10; step < 20; ++step) (*w)->AddScalar(step, "loss", static_cast<float>(step));
    signal(SIGABRT, SIG_DFL);
    abort();  // no destructor, no flush
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  std::vector<std::string> files = EventFiles(dir);
  REQUIRE(files.size() == 1);

  // A flush cut short by the crash: half of a record after the complete ones.
  std::string path = dir + "/" + files[0];
  std::string torn = ReadFile(path).substr(0, 30);
  {
    std::FILE* f = std::fopen(path.c_str(), "ab");
    REQUIRE(f != nullptr);
    std::fwrite(torn.data(), 1, 20, f);
    std::fclose(f);
  }
  nlohmann::json runs = ReadEvents(dir);
  const nlohmann::json& loss = runs["."]["scalars"]["loss"];
  REQUIRE(loss.size() == 10);
  for (int step = 0; step < 10; ++step) CHECK(loss[step][0] == step);
}

TEST_CASE("A directory that cannot be made is an error naming it", "[tensorboard]") {
  TempDir tmp;
  cohort::testing::WriteFile(tmp.File("file"), "x");
  auto w = EventFileWriter::Create(tmp.File("file/sub"));
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(w.status().message()), Catch::Contains(tmp.File("file/sub")));
}

}  // namespace
}  // namespace cohort::tensorboard
