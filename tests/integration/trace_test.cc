// Issue 9's step timeline and live curves on a real cluster: a coordinator and one agent
// with two CPU slots run digits jobs submitted with `cohort submit --trace`. Every rank's
// agent uploads the rank's timeline when it ends, also when the job is cancelled, and
// `cohort trace JOB -o FILE` merges them into one Chrome trace: valid JSON, one process
// named "rank N" per rank, step spans with their phases nested inside, each bucket's
// all-reduce inside its step, times since the Unix epoch. Rank 0's TensorBoard files are
// uploaded after every epoch, so `cohort download` of a running job brings the curves so
// far (read back with TensorBoard's own reader). And the CLI's errors: a job not
// traced, a trace not there yet, an unknown job.

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/common/zip/python.h"
#include "tests/integration/cluster.h"
#include "tests/integration/job_client.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {
namespace {

const std::string kSource = COHORT_SOURCE_DIR;
const std::string kModel = kSource + "/examples/digits_cnn.keras";

std::vector<std::string> SubmitDigits(const DigitsData& data, std::vector<std::string> extra) {
  std::vector<std::string> args{"submit",         kModel,
                                "--x",            data.File("x_train.npy"),
                                "--y",            data.File("y_train.npy"),
                                "--validation-x", data.File("x_test.npy"),
                                "--validation-y", data.File("y_test.npy"),
                                "--workers",      "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::string Submit(Cluster& cluster, const DigitsData& data, std::vector<std::string> extra) {
  CommandResult r = cluster.Cli(SubmitDigits(data, std::move(extra)));
  INFO(r.output);
  REQUIRE(r.status.code == 0);
  std::smatch match;
  REQUIRE(std::regex_search(r.out, match, std::regex("job-[0-9a-f]{12}")));
  return match.str();
}

struct Span {
  std::string name;
  int64_t start, end;
  int epoch;
};

// What a rank's part of the merged trace holds, by track (tid).
struct RankTrace {
  std::vector<Span> compute, all_reduce;
};

// Checks the merged Chrome trace in `path`: one process per rank of `world`, named
// "rank N"; on each rank's compute track the spans nest properly and every phase lies
// inside a step; every bucket's all-reduce lies inside a step of its rank; every time is
// microseconds since the Unix epoch, around `submitted`. Returns the spans by rank.
std::map<int, RankTrace> CheckTrace(const std::string& path, int world, absl::Time submitted) {
  nlohmann::json trace = nlohmann::json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
  REQUIRE(trace.is_object());
  REQUIRE(trace["traceEvents"].is_array());
  std::map<int, std::string> names;
  std::map<int, RankTrace> ranks;
  const int64_t earliest = absl::ToUnixMicros(submitted - absl::Minutes(1));
  const int64_t latest = absl::ToUnixMicros(absl::Now() + absl::Minutes(1));
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      CHECK(names.count(e["pid"].get<int>()) == 0);  // one process per rank
      names[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
      continue;
    }
    if (e["ph"] != "X") continue;
    Span s{e["name"], e["ts"].get<int64_t>(), e["ts"].get<int64_t>() + e["dur"].get<int64_t>(),
           e.contains("args") ? e["args"].value("epoch", 0) : 0};
    INFO(e.dump());
    CHECK(s.start >= earliest);
    CHECK(s.end <= latest);
    RankTrace& rank = ranks[e["pid"].get<int>()];
    (e["tid"] == 0 ? rank.compute : rank.all_reduce).push_back(s);
  }
  std::map<int, std::string> expected;
  for (int r = 0; r < world; ++r) expected[r] = absl::StrCat("rank ", r);
  CHECK(names == expected);
  REQUIRE(ranks.size() == static_cast<size_t>(world));
  for (auto& [pid, rank] : ranks) {
    INFO("rank " << pid);
    REQUIRE(names.count(pid) == 1);
    std::vector<Span> steps;
    for (const Span& s : rank.compute) {
      if (s.name == "step") steps.push_back(s);
    }
    REQUIRE(!steps.empty());
    auto step_of = [&](const Span& s) -> const Span* {
      for (const Span& step : steps) {
        if (step.start <= s.start && s.end <= step.end) return &step;
      }
      return nullptr;
    };
    // Proper nesting on the compute track: no two spans overlap partially.
    std::vector<Span> sorted = rank.compute;
    std::sort(sorted.begin(), sorted.end(), [](const Span& a, const Span& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<int64_t> open;  // ends of the enclosing spans
    int partial = 0;
    for (const Span& s : sorted) {
      while (!open.empty() && open.back() <= s.start) open.pop_back();
      if (!open.empty() && s.end > open.back()) ++partial;
      open.push_back(s.end);
    }
    CHECK(partial == 0);
    // Every step has forward, backward, the gradient sum and the optimizer inside it:
    // the cluster's ranks share this machine, so they share one copy of the model
    // (shared_replica.h) and their all-reduce track stays empty.
    CHECK(rank.all_reduce.empty());
    std::map<const Span*, std::set<std::string>> phases;
    for (const Span& s : rank.compute) {
      if (s.name == "step") continue;
      const Span* step = step_of(s);
      INFO(s.name);
      REQUIRE(step != nullptr);
      phases[step].insert(s.name);
    }
    for (const Span& step : steps) {
      const std::set<std::string>& names_in = phases[&step];
      for (const char* phase : {"forward", "backward", "gradient sum", "optimizer"}) {
        INFO(phase);
        CHECK(names_in.count(phase) == 1);
      }
    }
  }
  // The ranks' timelines line up: their first steps began within a minute.
  CHECK(std::abs(ranks[0].compute.front().start - ranks[1].compute.front().start) <
        absl::ToInt64Microseconds(absl::Minutes(1)));
  return ranks;
}

int StepCount(const RankTrace& rank) {
  return static_cast<int>(std::count_if(rank.compute.begin(), rank.compute.end(),
                                        [](const Span& s) { return s.name == "step"; }));
}

bool HasArtifacts(const v1::Job& job, const std::string& prefix, int count) {
  int n = 0;
  for (const v1::ArtifactInfo& a : job.artifacts()) n += absl::StartsWith(a.name(), prefix);
  return n >= count;
}

TEST_CASE("cohort trace merges every rank's timeline and says why when there is none",
          "[integration][trace]") {
  DigitsData data;
  Cluster cluster("3s");
  REQUIRE(cluster.StartServer());
  cluster.StartWorker("w1", 2);
  REQUIRE(cluster.WaitForWorkerState("w1", "alive"));
  JobClient jobs(cluster.address());

  const absl::Time submitted = absl::Now();
  const std::string id = Submit(cluster, data, {"--epochs", "2", "--batch-size", "64", "--trace"});
  {  // No rank has ended yet: nothing to merge.
    CommandResult early = cluster.Cli({"trace", id, "-o", cluster.dir().File("early.json")});
    INFO(early.output);
    CHECK(early.status.code == 1);
    CHECK(absl::StrContains(early.output, "has no trace yet: each rank uploads its trace when it ends"));
    CHECK_FALSE(std::filesystem::exists(cluster.dir().File("early.json")));
  }
  v1::Job done = jobs.WaitForState(id, v1::JOB_STATE_SUCCEEDED);
  CHECK(done.spec().trace());
  CHECK(HasArtifacts(done, "trace/rank-", 2));

  TempDir out;
  CommandResult merged = cluster.Cli({"trace", id, "-o", out.File("trace.json")});
  INFO(merged.output);
  REQUIRE(merged.status.code == 0);
  CHECK(absl::StrContains(merged.out, "2 of 2 ranks"));
  std::map<int, RankTrace> ranks = CheckTrace(out.File("trace.json"), 2, submitted);
  // Both ranks took every step of both epochs.
  CHECK(StepCount(ranks[0]) == StepCount(ranks[1]));
  std::set<int> epochs;
  for (const Span& s : ranks[1].compute) {
    if (s.name == "step") epochs.insert(s.epoch);
  }
  CHECK(epochs == std::set<int>{1, 2});

  // A job submitted without --trace has no timeline to merge.
  const std::string plain = Submit(cluster, data, {"--epochs", "1"});
  CommandResult untraced = cluster.Cli({"trace", plain});
  INFO(untraced.output);
  CHECK(untraced.status.code == 1);
  CHECK(absl::StrContains(untraced.output, "job " + plain + " was not traced: submit it with --trace"));
  REQUIRE(jobs.Cancel(plain).ok());
  CommandResult unknown = cluster.Cli({"trace", "job-000000000000"});
  INFO(unknown.output);
  CHECK(unknown.status.code == 1);
  CHECK(absl::StrContains(unknown.output, "job-000000000000"));
}

TEST_CASE("A running job's curves download after each epoch and a cancelled job's ranks hand "
          "in their traces",
          "[integration][trace][tensorboard]") {
  DigitsData data;
  Cluster cluster("3s");
  REQUIRE(cluster.StartServer());
  cluster.StartWorker("w1", 2);
  REQUIRE(cluster.WaitForWorkerState("w1", "alive"));
  JobClient jobs(cluster.address());

  const absl::Time submitted = absl::Now();
  const std::string id =
      Submit(cluster, data, {"--epochs", "1000", "--batch-size", "64", "--checkpoint-every", "0",
                             "--trace"});
  // After its first epoch the job runs on, and rank 0's curves so far are artifacts.
  REQUIRE(jobs.WaitFor(
      id, [](const v1::Job& j) { return HasArtifacts(j, "tensorboard/train/", 1); },
      absl::Seconds(300)));
  TempDir curves;
  CommandResult downloaded =
      cluster.Cli({"download", id, "--name", "tensorboard/", "-o", curves.path()});
  INFO(downloaded.output);
  REQUIRE(downloaded.status.code == 0);
  CHECK(jobs.Get(id).state() == v1::JOB_STATE_RUNNING);
  nlohmann::json runs = nlohmann::json::parse(
      RunPython("tests/common/tensorboard/read_events.py", {curves.File("tensorboard")}))["runs"];
  REQUIRE(runs.contains("train"));
  const size_t epochs_so_far = runs["train"]["scalars"]["epoch_loss"].size();
  CHECK(epochs_so_far >= 1);
  CHECK(epochs_so_far < 1000);
  CHECK(runs["train"]["scalars"]["batch_loss"].size() >= 1);
  // The default download of an unfinished job fetches the curves and says the model
  // is not there yet.
  CommandResult defaults = cluster.Cli({"download", id, "-o", curves.File("defaults")});
  INFO(defaults.output);
  CHECK(defaults.status.code == 1);
  CHECK(absl::StrContains(defaults.output, "has no artifact 'model.keras' (the job is RUNNING"));
  CHECK(std::filesystem::is_directory(curves.File("defaults/tensorboard/train")));

  // Cancelled mid-run: each rank's agent still uploads the rank's timeline.
  REQUIRE(jobs.Cancel(id).ok());
  const bool handed_in = jobs.WaitFor(
      id, [](const v1::Job& j) { return HasArtifacts(j, "trace/rank-", 2); }, absl::Seconds(60));
  INFO(ReadFile(cluster.dir().File("worker-w1.log")));
  REQUIRE(handed_in);
  CHECK(jobs.Get(id).state() == v1::JOB_STATE_CANCELLED);
  TempDir out;
  CommandResult merged = cluster.Cli({"trace", id, "-o", out.File("trace.json")});
  INFO(merged.output);
  REQUIRE(merged.status.code == 0);
  std::map<int, RankTrace> ranks = CheckTrace(out.File("trace.json"), 2, submitted);
  CHECK(StepCount(ranks[0]) > 0);
}

}  // namespace
}  // namespace cohort::testing
