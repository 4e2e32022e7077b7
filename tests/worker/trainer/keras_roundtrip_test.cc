// Round trip through real Keras: Keras builds and saves models (keras_models.py),
// `cohort-worker train` trains them, `keras.saving.load_model` loads what Cohort wrote
// and predicts what `cohort-worker predict` predicts. And bad input through the
// binary: each refusal is exit code 1, one line on stderr that says what is wrong and
// where, and no model.keras.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/npy/npy_array.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kWorker[] = COHORT_WORKER_BIN;
constexpr char kPython[] = COHORT_VENV_PYTHON;
const std::string kFixtures = std::string(COHORT_SOURCE_DIR) + "/tests/worker/trainer/keras_models.py";

constexpr double kPredictionTol = 1e-4;

std::string Describe(const CommandResult& r) {
  return absl::StrCat("exit ", r.status.code, " signal ", r.status.signal, "\n", r.output);
}

void KerasFixtures(const std::string& command, const std::string& dir) {
  CommandResult r = RunCommand({kPython, kFixtures, command, dir}, absl::Seconds(600),
                               {{"KERAS_BACKEND", "jax"}});
  INFO(Describe(r));
  REQUIRE(r.status.code == 0);
}

CommandResult Worker(const std::vector<std::string>& args) {
  std::vector<std::string> argv{kWorker};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, absl::Seconds(300));
}

struct Array {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

Array ReadFloats(const std::string& path) {
  absl::StatusOr<std::unique_ptr<npy::NpyArray>> a = npy::OpenArray(path, "");
  INFO(path << ": " << a.status().ToString());
  REQUIRE(a.ok());
  Array out{(*a)->shape(), std::vector<float>((*a)->rows() * (*a)->row_elements())};
  std::vector<int64_t> rows((*a)->rows());
  for (int64_t i = 0; i < (*a)->rows(); ++i) rows[i] = i;
  REQUIRE((*a)->GatherRows(rows, npy::DType::kFloat32, out.values.data()).ok());
  return out;
}

double MaxAbsDiff(const Array& a, const Array& b) {
  REQUIRE(a.shape == b.shape);
  double worst = 0;
  for (size_t i = 0; i < a.values.size(); ++i) {
    double d = std::abs(double(a.values[i]) - b.values[i]);
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

TEST_CASE("Keras loads the models Cohort trains and predicts what cohort-worker predicts",
          "[keras]") {
  TempDir dir;
  KerasFixtures("roundtrip", dir.path());
  std::vector<std::string> names;
  for (const nlohmann::json& c : nlohmann::json::parse(ReadFile(dir.File("cases.json")))) {
    names.push_back(c["name"].get<std::string>());
  }
  REQUIRE(names == std::vector<std::string>{"mlp", "cnn", "residual", "text", "dropout"});
  std::vector<std::string> trained;
  for (const std::string& name : names) {
    const std::string c = dir.File(name);
    INFO("model " << name);
    CommandResult train = Worker({"train", c + "/job.yaml", "--out", c + "/out"});
    INFO(Describe(train));
    CHECK(train.status.code == 0);
    if (train.status.code != 0) continue;
    nlohmann::json history = nlohmann::json::parse(ReadFile(c + "/out/history.json"));
    CHECK(history["loss"].size() == 2);
    bool predicted = true;
    for (const char* out : {"/cohort_pred.npy", "/cohort_pred2.npy"}) {
      CommandResult predict = Worker({"predict", c + "/out/model.keras", "--x", c + "/x_pred.npy",
                                      "--out", c + out, "--batch-size", "7"});
      INFO(Describe(predict));
      CHECK(predict.status.code == 0);
      predicted = predicted && predict.status.code == 0;
    }
    if (predicted) trained.push_back(name);
  }
  KerasFixtures("predict", dir.path());
  CHECK(trained == names);
  for (const std::string& name : trained) {
    const std::string c = dir.File(name);
    INFO("model " << name);
    Array cohort = ReadFloats(c + "/cohort_pred.npy");
    // Inference is deterministic: Dropout is off, BatchNormalization uses its moving
    // statistics.
    CHECK(MaxAbsDiff(cohort, ReadFloats(c + "/cohort_pred2.npy")) == 0.0);
    CHECK(MaxAbsDiff(cohort, ReadFloats(c + "/keras_pred.npy")) <= kPredictionTol);
    // And training changed what the model predicts.
    CHECK(MaxAbsDiff(cohort, ReadFloats(c + "/init_pred.npy")) > 1e-3);
  }
}

struct BadInput {
  std::string what;
  std::string model;  // files of the "bad" fixtures
  std::string x;
  std::string y;
  std::vector<std::string> says;  // substrings of the error line
  std::string pattern = {};       // a regex the line must match, when set
};

// The "bad" fixtures, made once per process (Catch2 runs the test body once per
// section).
const std::string& BadFixtures() {
  static TempDir dir;
  static bool made = false;
  if (!made) {
    KerasFixtures("bad", dir.path());
    made = true;
  }
  return dir.path();
}

void CheckRefusal(const CommandResult& r, const std::string& command,
                  const std::vector<std::string>& says, const std::string& pattern) {
  const std::string stderr_text = r.output.substr(r.out.size());
  INFO(Describe(r));
  CHECK(r.status.code == 1);
  std::vector<std::string> lines = absl::StrSplit(stderr_text, '\n', absl::SkipWhitespace());
  REQUIRE(lines.size() == 1);
  CHECK(absl::StartsWith(lines[0], "cohort-worker " + command + ": error: "));
  for (const std::string& s : says) CHECK(absl::StrContains(lines[0], s));
  if (!pattern.empty()) CHECK(std::regex_search(lines[0], std::regex(pattern)));
}

TEST_CASE("cohort-worker train refuses bad input with one clear line and writes no model",
          "[keras]") {
  const std::string dir = BadFixtures();
  auto file = [&](const std::string& name) { return dir + "/" + name; };
  const std::vector<BadInput> cases = {
      {"an unsupported layer", "lstm.keras", "x_lstm.npy", "y_reg.npy",
       {"lstm.keras", "layer 'recurrent' has class LSTM"}},
      {"a truncated .keras", "truncated.keras", "x.npy", "y.npy",
       {"truncated.keras", "truncated zip"}},
      {"a .keras that is not a zip", "notzip.keras", "x.npy", "y.npy",
       {"notzip.keras", "not a zip"}},
      {"x shaped wrong", "good.keras", "x_wide.npy", "y.npy",
       {"x_wide.npy rows have shape (5,)", "takes inputs of shape (4,)"}},
      {"labels out of range", "good.keras", "x.npy", "y_range.npy",
       {"y_range.npy", "label 3 in row 11", "'probs'"}},
      {"NaN in x", "good.keras", "x_nan.npy", "y.npy", {"x_nan.npy", "row 17", "NaN"}},
      {"a loss that becomes NaN", "exploding.keras", "x.npy", "y_reg.npy", {},
       "NaN or infinite at epoch 1, step [0-9]+"},
      {"zero-row arrays", "good.keras", "x_empty.npy", "y_empty.npy", {"x_empty.npy", "zero rows"}},
      {"float labels for sparse crossentropy", "good.keras", "x.npy", "y_float.npy",
       {"y_float.npy", "row 5", "1.5", "integers"}},
  };
  for (const BadInput& b : cases) {
    DYNAMIC_SECTION(b.what) {
      TempDir run;
      const std::string job = run.File("job.yaml"), out = run.File("out");
      WriteFile(job, absl::StrCat("name: bad\nmodel: ", file(b.model), "\ndata:\n  x: ",
                                  file(b.x), "\n  y: ", file(b.y),
                                  "\nfit:\n  epochs: 2\n  batch_size: 8\n"));
      CheckRefusal(Worker({"train", job, "--out", out}), "train", b.says, b.pattern);
      CHECK(!fs::exists(out + "/model.keras"));
    }
  }
}

TEST_CASE("cohort-worker predict refuses bad input with one clear line and writes nothing",
          "[keras]") {
  const std::string dir = BadFixtures();
  TempDir run;
  const std::string out = run.File("pred.npy");
  SECTION("x shaped wrong") {
    CheckRefusal(Worker({"predict", dir + "/good.keras", "--x", dir + "/x_wide.npy", "--out", out}),
                 "predict", {"x_wide.npy rows have shape (5,)", "(4,)"}, "");
  }
  SECTION("a truncated .keras") {
    CheckRefusal(Worker({"predict", dir + "/truncated.keras", "--x", dir + "/x.npy", "--out", out}),
                 "predict", {"truncated.keras"}, "");
  }
  CHECK(!fs::exists(out));
}

}  // namespace
}  // namespace cohort::testing
