// `cohort-worker train --trace` on 2 ranks sharing --out: each rank's file, and rank 0's
// merged trace.json, judged by check_trace.py (valid Chrome trace JSON, one process
// per rank with a compute and an all-reduce track, spans that nest properly). And
// `--profile-epoch`: LibTorch's profile of one epoch.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

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

CommandResult Python(const std::vector<std::string>& args) {
  std::vector<std::string> argv{kPython};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, kTimeout);
}

// The digits dataset in dir/data (examples/make_digits.py).
void MakeDigits(const TempDir& dir) {
  CommandResult digits = Python({kSource + "/examples/make_digits.py", dir.File("data")});
  INFO(digits.output);
  REQUIRE(digits.status.code == 0);
}

// dir/job.yaml: digits_cnn on that dataset; `fit`: the fit section's fields, with
// "\n  " between them.
void WriteDigitsJob(const TempDir& dir, const std::string& fit) {
  WriteFile(dir.File("job.yaml"), absl::StrCat("model: ", kSource, "/examples/digits_cnn.keras\n",
                                               "data:\n  x: data/x_train.npy\n  y: data/y_train.npy\n",
                                               "fit:\n  ", fit, "\n"));
}

// The steps per epoch of a rank's "start" event, in its stdout; 0 without one.
int64_t StartSteps(const std::string& out) {
  int64_t steps = 0;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
    if (j.is_object() && j.value("event", "") == "start") steps = j["steps"].get<int64_t>();
  }
  return steps;
}

TEST_CASE("train --trace records every step of every rank as a Chrome trace", "[trainer][trace][python]") {
  // Ranks on one machine share one copy of the model (shared_replica.h): no all-reduce
  // runs, each step sums its part of the gradients. With --replica-per-rank they
  // all-reduce buckets during backward, as ranks on several machines do.
  for (bool shared : {true, false}) {
    INFO((shared ? "sharing the model" : "a replica per rank"));
    TempDir dir;
    MakeDigits(dir);
    WriteDigitsJob(dir, "epochs: 2\n  batch_size: 128");
    std::vector<std::unique_ptr<Process>> ranks;
    for (int r = 0; r < 2; ++r) {
      std::vector<std::string> args{kWorker, "train", dir.File("job.yaml"), "--rank", std::to_string(r),
                                    "--world", "2", "--out", dir.File("out"), "--rendezvous",
                                    "file://" + dir.File("rendezvous"), "--threads", "1", "--trace"};
      if (!shared) args.push_back("--replica-per-rank");
      ranks.push_back(std::make_unique<Process>(args, dir.File(absl::StrCat("rank", r, ".log"))));
    }
    for (int r = 0; r < 2; ++r) {
      std::optional<ExitStatus> exit = ranks[r]->Wait(kTimeout);
      INFO("rank " << r << ":\n" << ranks[r]->Output());
      REQUIRE(exit.has_value());
      REQUIRE(exit->code == 0);
    }
    const int64_t steps = StartSteps(ranks[0]->Output());
    REQUIRE(steps > 1);

    const std::string checker = kSource + "/tests/worker/trainer/check_trace.py";
    // Rank 0's own file is a trace of rank 0 alone.
    CommandResult own = Python({checker, dir.File("out/trace/rank-0.json"), "1"});
    INFO(own.output);
    REQUIRE(own.status.code == 0);
    CommandResult merged = Python({checker, dir.File("out/trace.json"), "2"});
    INFO(merged.output);
    REQUIRE(merged.status.code == 0);
    nlohmann::json summary = nlohmann::json::parse(merged.out)["ranks"];
    const char* reduce = shared ? "gradient sum" : "all-reduce wait";
    for (const std::string r : {"0", "1"}) {
      INFO("rank " << r);
      CHECK(summary[r]["steps"] == 2 * steps);
      for (const char* phase : {"data", "forward", "backward", reduce, "optimizer"}) {
        INFO(phase);
        CHECK(summary[r]["phases"][phase] == 2 * steps);
      }
      if (shared) {
        CHECK(summary[r]["buckets"] == 0);
      } else {
        CHECK(summary[r]["buckets"].get<int64_t>() >= 2 * steps);
      }
    }
  }
}

TEST_CASE("A run that fails mid-epoch keeps its timeline so far", "[trainer][trace][python]") {
  TempDir dir;
  MakeDigits(dir);
  // The last rows' inputs are NaN: without shuffling, the first epoch's last steps fail.
  CommandResult poisoned = Python(
      {"-c", "import numpy as np, sys; x = np.load(sys.argv[1]); x[-100:] = np.nan; "
             "np.save(sys.argv[1], x)",
       dir.File("data/x_train.npy")});
  INFO(poisoned.output);
  REQUIRE(poisoned.status.code == 0);
  WriteDigitsJob(dir, "epochs: 2\n  batch_size: 128\n  shuffle: false");
  CommandResult run = RunCommand({kWorker, "train", dir.File("job.yaml"), "--out", dir.File("out"),
                                  "--threads", "1", "--trace"},
                                 kTimeout);
  INFO(run.output);
  REQUIRE(run.status.code == 1);
  CommandResult own = Python({kSource + "/tests/worker/trainer/check_trace.py",
                              dir.File("out/trace/rank-0.json"), "1"});
  INFO(own.output);
  REQUIRE(own.status.code == 0);
  CHECK(nlohmann::json::parse(own.out)["ranks"]["0"]["steps"].get<int64_t>() >= 1);
}

TEST_CASE("train --profile-epoch records one epoch's operators, Cohort's loops among them",
          "[trainer][trace][python]") {
  TempDir dir;
  MakeDigits(dir);
  // digits_cnn: Conv2D 32 'same' relu on 8x8x1, then MaxPooling2D 2: Cohort's fused
  // loops; the second Conv2D goes to LibTorch.
  WriteDigitsJob(dir, "epochs: 3\n  batch_size: 128");
  CommandResult run = RunCommand({kWorker, "train", dir.File("job.yaml"), "--out", dir.File("out"),
                                  "--threads", "1", "--profile-epoch", "2"},
                                 kTimeout);
  INFO(run.output);
  REQUIRE(run.status.code == 0);
  const int64_t steps = StartSteps(run.out);
  REQUIRE(steps > 1);
  nlohmann::json profile = nlohmann::json::parse(ReadFile(dir.File("out/profile/rank-0.json")));
  REQUIRE(profile.is_array());
  std::map<std::string, int64_t> count;
  for (const nlohmann::json& event : profile) {
    if (event.value("ph", "") == "X") ++count[event.value("name", "")];
  }
  // One epoch's steps, each once: not the epochs before or after.
  CHECK(count["cohort::SmallConv2DMaxPool2D"] == steps);
  CHECK(count["cohort::optimizer"] == steps);
  CHECK(count["cohort::data"] == steps);
  CHECK(count["aten::convolution_backward"] == steps);

  CommandResult past = RunCommand({kWorker, "train", dir.File("job.yaml"), "--out",
                                   dir.File("out2"), "--profile-epoch", "4"},
                                  kTimeout);
  CHECK(past.status.code == 2);
  CHECK(past.output.find("--profile-epoch 4: the job trains 3 epoch(s)") != std::string::npos);
}

TEST_CASE("A trace checker that can fail", "[trainer][trace][python]") {
  TempDir dir;
  WriteFile(dir.File("bad.json"),
            R"({"traceEvents":[)"
            R"({"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"rank 0"}},)"
            R"({"name":"thread_name","ph":"M","pid":0,"tid":0,"args":{"name":"compute"}},)"
            R"({"name":"thread_name","ph":"M","pid":0,"tid":1,"args":{"name":"all-reduce"}},)"
            R"({"name":"step","ph":"X","ts":0,"dur":10,"pid":0,"tid":0},)"
            R"({"name":"data","ph":"X","ts":5,"dur":10,"pid":0,"tid":0}]})");
  CommandResult r = Python({kSource + "/tests/worker/trainer/check_trace.py", dir.File("bad.json"), "1"});
  CHECK(r.status.code == 1);
  CHECK(r.output.find("without nesting") != std::string::npos);
}

}  // namespace
}  // namespace cohort::testing
