// Rank 0's TensorBoard curves from a real 2-rank run of the cohort-worker binary, read
// with TensorBoard's own reader (tests/common/tensorboard/read_events.py): every epoch
// metric of history.json at every epoch, every per-step scalar at every step; and every
// rank's "rank_stats" events, which the agent turns into metrics.

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {
namespace {

constexpr char kWorker[] = COHORT_WORKER_BIN;
constexpr char kPython[] = COHORT_VENV_PYTHON;
const std::string kSource = COHORT_SOURCE_DIR;
constexpr absl::Duration kTimeout = absl::Seconds(240);

std::string Python(const std::vector<std::string>& args) {
  std::vector<std::string> argv{kPython};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = RunCommand(argv, kTimeout);
  INFO(r.output);
  REQUIRE(r.status.code == 0);
  return r.out;
}

std::vector<nlohmann::json> Events(const std::string& output, const std::string& kind) {
  std::vector<nlohmann::json> events;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StartsWith(line, "{")) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == kind) events.push_back(std::move(j));
  }
  return events;
}

TEST_CASE("Rank 0 writes every scalar at every step for TensorBoard", "[trainer][tensorboard][python]") {
  TempDir dir;
  Python({kSource + "/examples/make_digits.py", dir.File("data")});
  constexpr int kEpochs = 2;
  WriteFile(dir.File("job.yaml"), absl::StrCat("model: ", kSource, "/examples/digits_cnn.keras\n",
                                               "data:\n  x: data/x_train.npy\n  y: data/y_train.npy\n",
                                               "  validation_x: data/x_test.npy\n",
                                               "  validation_y: data/y_test.npy\n",
                                               "fit:\n  epochs: ", kEpochs, "\n  batch_size: 128\n"));
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_unique<Process>(
        std::vector<std::string>{kWorker, "train", dir.File("job.yaml"), "--rank", std::to_string(r),
                                 "--world", "2", "--out", dir.File("out"), "--rendezvous",
                                 "file://" + dir.File("rendezvous"), "--threads", "1"},
        dir.File(absl::StrCat("rank", r, ".log"))));
  }
  for (int r = 0; r < 2; ++r) {
    std::optional<ExitStatus> exit = ranks[r]->Wait(kTimeout);
    INFO("rank " << r << ":\n" << ranks[r]->Output());
    REQUIRE(exit.has_value());
    REQUIRE(exit->code == 0);
  }
  std::vector<nlohmann::json> start = Events(ranks[0]->Output(), "start");
  REQUIRE(start.size() == 1);
  const int64_t steps = start[0]["steps"].get<int64_t>();
  REQUIRE(steps > 1);
  nlohmann::json history = nlohmann::json::parse(ReadFile(dir.File("out/history.json")));

  nlohmann::json runs = nlohmann::json::parse(
      Python({kSource + "/tests/common/tensorboard/read_events.py", dir.File("out/tensorboard")}))["runs"];
  REQUIRE(runs.contains("train"));
  REQUIRE(runs.contains("validation"));
  CHECK(runs.size() == 2);
  const nlohmann::json& train = runs["train"]["scalars"];
  const nlohmann::json& validation = runs["validation"]["scalars"];

  // Epoch scalars, at step = epoch (0-based) as Keras' TensorBoard callback writes them,
  // equal to history.json (float32 on the wire).
  int val_keys = 0;
  for (const auto& [name, values] : history.items()) {
    bool val = absl::StartsWith(name, "val_");
    val_keys += val;
    std::string tag = "epoch_" + (val ? name.substr(4) : name);
    const nlohmann::json& run = val ? validation : train;
    INFO(name << " as " << tag);
    REQUIRE(run.contains(tag));
    REQUIRE(run[tag].size() == kEpochs);
    for (int e = 0; e < kEpochs; ++e) {
      CHECK(run[tag][e][0] == e);
      CHECK(run[tag][e][1].get<double>() == Approx(values[e].get<double>()).epsilon(1e-6));
    }
  }
  CHECK(val_keys >= 1);
  for (const std::string tag : {"epoch_learning_rate", "epoch_samples_per_second"}) {
    INFO(tag);
    REQUIRE(train[tag].size() == kEpochs);
    CHECK(train[tag][1][1].get<double>() > 0);
  }

  // Per-step scalars at every global step 1..epochs*steps.
  for (const std::string tag :
       {"batch_loss", "batch_learning_rate", "batch_samples_per_second", "batch_step_seconds",
        "batch_data_wait_seconds", "batch_all_reduce_seconds", "batch_all_reduce_wait_seconds"}) {
    INFO(tag);
    REQUIRE(train.contains(tag));
    REQUIRE(static_cast<int64_t>(train[tag].size()) == kEpochs * steps);
    for (int64_t s = 0; s < kEpochs * steps; ++s) {
      CHECK(train[tag][s][0] == s + 1);
      CHECK(std::isfinite(train[tag][s][1].get<double>()));
      CHECK(train[tag][s][1].get<double>() >= 0);
    }
  }
  CHECK(train["batch_learning_rate"][0][1].get<double>() == Approx(0.001));  // Adam's default
  CHECK(train["batch_all_reduce_seconds"][steps - 1][1].get<double>() > 0);
  CHECK(train["batch_samples_per_second"][steps - 1][1].get<double>() > 0);

  // Every rank reports its own step statistics, ending each epoch with a window.
  for (int r = 0; r < 2; ++r) {
    std::vector<nlohmann::json> stats = Events(ranks[r]->Output(), "rank_stats");
    INFO("rank " << r);
    REQUIRE(stats.size() >= kEpochs);
    int64_t stepped = 0, bytes = 0;
    for (const nlohmann::json& s : stats) {
      CHECK(s["rank"] == r);
      stepped += s["steps"].get<int64_t>();
      bytes += s["all_reduce_bytes"].get<int64_t>();
      CHECK(s["step_seconds"].get<double>() >= s["data_seconds"].get<double>());
      CHECK(s["rss_bytes"].get<int64_t>() > 0);
    }
    CHECK(stepped == kEpochs * steps);
    CHECK(bytes > 0);
    CHECK(stats.back()["epoch"] == kEpochs);
    CHECK(stats.back()["step"] == steps);
  }
}

}  // namespace
}  // namespace cohort::testing
