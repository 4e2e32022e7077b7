#include "tests/faults/fault_harness.h"

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/support/process.h"

namespace cohort::testing {
namespace {

namespace fs = std::filesystem;

const std::string kSource = COHORT_SOURCE_DIR;
constexpr char kPython[] = COHORT_VENV_PYTHON;

}  // namespace

DigitsJob FaultJob(const std::string& name) {
  DigitsJob job;
  job.name = name;
  job.workers = 2;
  job.epochs = kFaultEpochs;
  job.batch_size = 64;
  job.max_restarts = 3;
  job.every_epochs = 1;
  return job;
}

const DigitsData& SharedDigits() {
  static const DigitsData data;  // removed at exit
  return data;
}

std::mt19937_64 SeededRandom(const std::string& test) {
  uint64_t seed = 0;
  const char* given = std::getenv("COHORT_FAULT_SEED");
  if (given == nullptr || !absl::SimpleAtoi(given, &seed)) seed = std::random_device{}();
  std::fprintf(stderr, "%s: fault seed %llu (rerun with COHORT_FAULT_SEED=%llu)\n", test.c_str(),
               static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

FaultPoints::FaultPoints(const std::string& point) : point_(point) {
  name_ = point.substr(0, point.rfind('@'));
}

std::map<std::string, std::string> FaultPoints::env() const {
  return {{"COHORT_FAULT_DIR", dir_.path()}, {"COHORT_FAULT_POINT", point_}};
}

int FaultPoints::WaitForHit(absl::Duration timeout) {
  int pid = 0;
  bool hit = WaitUntil(
      [&] {
        std::string text(absl::StripAsciiWhitespace(ReadFile(dir_.File(name_ + ".hit"))));
        return absl::SimpleAtoi(text, &pid) && pid > 0;
      },
      timeout);
  INFO("fault point " << point_ << " was never reached");
  REQUIRE(hit);
  return pid;
}

void FaultPoints::Release() { WriteFile(dir_.File(name_ + ".go"), "go\n"); }

const std::string& UndisturbedModel() {
  static const TempDir dir;  // removed at exit
  static const std::string model = [] {
    const DigitsData& digits = SharedDigits();
    std::string job = dir.File("job.yaml");
    WriteFile(job, DigitsJobYaml(FaultJob("undisturbed"), digits.dir()));
    std::vector<std::unique_ptr<Process>> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.push_back(std::make_unique<Process>(
          std::vector<std::string>{COHORT_WORKER_BIN, "train", job, "--rank", std::to_string(r),
                                   "--world", "2", "--rendezvous",
                                   "file://" + dir.File("rendezvous"), "--out", dir.File("out")},
          dir.File(absl::StrCat("rank", r, ".log"))));
    }
    for (auto& rank : ranks) {
      std::optional<ExitStatus> exit = rank->Wait(absl::Seconds(300));
      INFO(rank->Output());
      REQUIRE(exit.has_value());
      REQUIRE(exit->code == 0);
    }
    return dir.File("out/model.keras");
  }();
  return model;
}

void CheckSameWeights(const std::string& model) {
  // rtol 0: every variable (weights and optimizer state) holds the same bytes.
  CommandResult r = RunCommand({kPython, kSource + "/tests/worker/trainer/training_fixtures.py",
                                "compare", UndisturbedModel(), model, "--rtol", "0"},
                               absl::Seconds(120));
  INFO("weights against the undisturbed run: " << r.output);
  REQUIRE((r.status.code == 0 || r.status.code == 1));
  nlohmann::json verdict = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE(verdict.is_object());
  CHECK(verdict["ok"] == true);
}

void CheckNothingHalfWritten(const std::string& data_dir, const v1::Job& job) {
  std::map<std::string, int64_t> recorded;
  for (const v1::ArtifactInfo& a : job.artifacts()) recorded[a.name()] = a.size_bytes();
  const fs::path root = fs::path(data_dir) / "jobs" / job.id();
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    const std::string name = fs::relative(e.path(), root).string();
    INFO("job file " << name);
    REQUIRE(recorded.count(name) == 1);
    CHECK(static_cast<int64_t>(e.file_size()) == recorded[name]);
  }
  CHECK(fs::is_empty(fs::path(data_dir) / "incoming"));
  for (const auto& e : fs::recursive_directory_iterator(data_dir)) {
    INFO(e.path().string());
    CHECK(!absl::StrContains(e.path().filename().string(), ".tmp"));
  }
}

std::string DescribeEvents(const std::vector<v1::JobEvent>& events) {
  std::string out;
  for (const v1::JobEvent& e : events) {
    if (e.has_step()) continue;
    absl::StrAppend(&out, "#", e.sequence(), " attempt ", e.attempt(), ": ");
    if (e.has_state_change()) absl::StrAppend(&out, StateName(e.state_change().to()));
    if (e.has_epoch()) absl::StrAppend(&out, "epoch ", e.epoch().epoch(), " ended");
    if (e.has_log()) absl::StrAppend(&out, "rank ", e.log().rank(), ": ", e.log().text());
    if (e.has_attempt_started()) {
      for (const v1::Placement& p : e.attempt_started().placements()) {
        absl::StrAppend(&out, "rank ", p.rank(), " on ", p.worker(), "; ");
      }
    }
    out += "\n";
  }
  return out;
}

std::string AttemptFailure(const std::vector<v1::JobEvent>& events, int attempt) {
  const std::string prefix = absl::StrCat("attempt ", attempt, " failed");
  for (const v1::JobEvent& e : events) {
    if (e.has_log() && e.log().rank() == -1 && absl::StartsWith(e.log().text(), prefix)) {
      return e.log().text();
    }
  }
  return "";
}

std::string ProcessesMatching(const std::string& text) {
  CommandResult r = RunCommand({"/usr/bin/pgrep", "-a", "-f", text});
  return r.status.code == 0 ? r.out : "";
}

void StartFaultCluster(Cluster& cluster, const FaultPoints& points,
                       const std::vector<std::string>& workers) {
  REQUIRE(cluster.StartServer());
  for (const std::string& name : workers) {
    WorkerOptions options;
    options.env = points.env();
    cluster.StartWorker(name, options);
  }
  for (const std::string& name : workers) {
    REQUIRE(cluster.WaitForWorkerState(name, "alive", kAgentStartTimeout));
  }
}

void StopAndCheckNothingLeft(Cluster& cluster, const std::vector<std::string>& workers) {
  for (const std::string& name : workers) {
    Process& w = cluster.worker(name);
    w.Signal(SIGTERM);
  }
  for (const std::string& name : workers) {
    INFO("agent " << name << " did not stop on SIGTERM");
    CHECK(cluster.worker(name).Wait(absl::Seconds(60)).has_value());
  }
  if (cluster.server().Running()) cluster.StopServer();
  std::string left;
  bool none = WaitUntil(
      [&] {
        left = ProcessesMatching(cluster.dir().path());
        return left.empty();
      },
      absl::Seconds(30));
  INFO("processes left:\n" << left);
  REQUIRE(none);
}

bool Listed(Cluster& cluster, const std::string& job_id) {
  CommandResult r;
  WaitUntil(
      [&] {
        r = cluster.Cli({"list", "-o", "json"});
        return r.status.code == 0;
      },
      absl::Seconds(60));
  INFO(r.output);
  REQUIRE(r.status.code == 0);
  nlohmann::json jobs = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE(jobs.is_array());
  for (const auto& j : jobs) {
    if (j.value("id", "") == job_id) return true;
  }
  return false;
}

}  // namespace cohort::testing
