// The job server end to end: a real coordinator, real agents and real trainers on
// loopback, driven as users drive them (the CLI, or JobService like a user's script).
// Covers issue 4's "done when": a 2-rank digits job from the CLI whose model loads in
// Keras, priority order, cancel mid-epoch, an agent killed mid-job (restart from the
// checkpoint, or FAILED past max_restarts), and a coordinator killed mid-job.

#include <signal.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/integration/cluster.h"
#include "tests/integration/job_client.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {
namespace {

const std::string kSource = COHORT_SOURCE_DIR;
constexpr char kPython[] = COHORT_VENV_PYTHON;
// Long enough that a loaded 2-core machine misses no heartbeat while two trainers run.
constexpr char kLeaseTtl[] = "3s";

std::set<std::string> Workers(const v1::Job& job) {
  std::set<std::string> names;
  for (const v1::Placement& p : job.placements()) names.insert(p.worker());
  return names;
}

// No trainer process of the job is left on this machine.
bool NoTrainerLeft(const std::string& job_id) {
  return RunCommand({"/usr/bin/pgrep", "-f", absl::StrCat("train .*", job_id)}).status.code == 1;
}

// Keras loads `model` and predicts the digits test set: {"accuracy": a, "rows": n}.
nlohmann::json KerasAccuracy(const std::string& model, const std::string& data_dir) {
  CommandResult r =
      RunCommand({kPython, kSource + "/examples/evaluate_digits.py", model, data_dir, "--json"},
                 absl::Seconds(180), {{"KERAS_BACKEND", "jax"}});
  INFO(r.output);
  REQUIRE(r.status.code == 0);
  return nlohmann::json::parse(r.out);
}

// Starts the coordinator and a one-slot agent per name, and waits until all are up.
void StartCluster(Cluster& cluster, const std::vector<std::string>& workers) {
  REQUIRE(cluster.StartServer());
  for (const std::string& name : workers) cluster.StartWorker(name, 1);
  for (const std::string& name : workers) REQUIRE(cluster.WaitForWorkerState(name, "alive"));
}

TEST_CASE("A 2-rank digits job submitted from the CLI succeeds and its model loads in Keras",
          "[integration][job]") {
  DigitsData digits;
  Cluster cluster(kLeaseTtl);
  StartCluster(cluster, {"w1", "w2"});

  DigitsJob spec;
  spec.epochs = 4;
  CommandResult submitted = cluster.Cli({"submit", digits.Write(spec)});
  INFO(submitted.output);
  REQUIRE(submitted.status.code == 0);
  std::smatch id_match;
  REQUIRE(std::regex_search(submitted.out, id_match, std::regex("job-[0-9a-f]{12}")));
  const std::string id = id_match.str();

  JobClient jobs(cluster.address());
  v1::Job job = jobs.WaitForState(id, v1::JOB_STATE_SUCCEEDED);
  CHECK(job.attempt() == 1);
  CHECK(job.restarts() == 0);
  CHECK(Workers(job) == std::set<std::string>{"w1", "w2"});
  CHECK(HasArtifact(job, "model.keras"));
  CHECK(HasArtifact(job, "history.json"));
  CHECK(HasArtifact(job, "checkpoints/"));

  std::vector<v1::JobEvent> events = jobs.Events(id);
  CheckNothingLost(events, v1::JOB_STATE_SUCCEEDED);
  CHECK(EndedEpochs(events) == std::set<int>{1, 2, 3, 4});
  std::vector<v1::JobState> states;
  for (const auto& e : events) {
    if (e.has_state_change()) states.push_back(e.state_change().to());
  }
  CHECK(states == std::vector<v1::JobState>{v1::JOB_STATE_QUEUED, v1::JOB_STATE_STARTING,
                                            v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED});

  TempDir out;
  CommandResult downloaded = cluster.Cli({"download", id, "-o", out.path()});
  INFO(downloaded.output);
  REQUIRE(downloaded.status.code == 0);
  nlohmann::json verdict = KerasAccuracy(out.File("model.keras"), digits.dir());
  CHECK(verdict["rows"] == 360);
  CHECK(verdict["accuracy"].get<double>() >= 0.9);
  REQUIRE(nlohmann::json::parse(ReadFile(out.File("history.json")))["loss"].size() == 4);
  CHECK(NoTrainerLeft(id));
}

TEST_CASE("Jobs queued behind a running one start in priority order", "[integration][job]") {
  DigitsData digits;
  Cluster cluster(kLeaseTtl);
  StartCluster(cluster, {"w1", "w2"});
  JobClient jobs(cluster.address());

  DigitsJob first{.name = "first", .epochs = 3};
  std::string running = jobs.Submit(digits.Write(first));
  jobs.WaitForState(running, v1::JOB_STATE_RUNNING);
  DigitsJob low{.name = "low", .epochs = 1, .priority = 0};
  DigitsJob high{.name = "high", .epochs = 1, .priority = 5};
  std::string low_id = jobs.Submit(digits.Write(low));
  std::string high_id = jobs.Submit(digits.Write(high));
  CHECK(jobs.Get(low_id).state() == v1::JOB_STATE_QUEUED);
  CHECK(jobs.Get(high_id).state() == v1::JOB_STATE_QUEUED);

  v1::Job a = jobs.WaitForState(running, v1::JOB_STATE_SUCCEEDED);
  v1::Job h = jobs.WaitForState(high_id, v1::JOB_STATE_SUCCEEDED);
  v1::Job l = jobs.WaitForState(low_id, v1::JOB_STATE_SUCCEEDED);
  auto seconds = [](const google::protobuf::Timestamp& t) { return t.seconds() * 1e9 + t.nanos(); };
  // Gang scheduling on two one-slot workers: each job had the whole cluster, in turn.
  CHECK(seconds(a.finished_at()) <= seconds(h.started_at()));
  CHECK(seconds(h.started_at()) < seconds(l.started_at()));
  CHECK(seconds(h.finished_at()) <= seconds(l.started_at()));
}

TEST_CASE("Cancelling a job mid-epoch stops every rank and frees the slots",
          "[integration][job]") {
  DigitsData digits;
  Cluster cluster(kLeaseTtl);
  StartCluster(cluster, {"w1", "w2"});
  JobClient jobs(cluster.address());

  DigitsJob forever{.name = "long", .epochs = 200};
  std::string id = jobs.Submit(digits.Write(forever));
  jobs.WaitForState(id, v1::JOB_STATE_RUNNING);
  // Mid-epoch: some steps have been reported.
  REQUIRE(jobs.WaitFor(id, [](const v1::Job& j) { return j.last_sequence() >= 6; },
                       absl::Seconds(60)));
  v1::Job cancelled;
  grpc::Status status = jobs.Cancel(id, &cancelled);
  INFO(status.error_message());
  REQUIRE(status.ok());
  CHECK(cancelled.state() == v1::JOB_STATE_CANCELLED);
  CHECK(jobs.Get(id).state() == v1::JOB_STATE_CANCELLED);
  // Cancelling again changes nothing.
  CHECK(jobs.Cancel(id).ok());
  REQUIRE(WaitUntil([&] { return NoTrainerLeft(id); }, absl::Seconds(30)));
  CheckNothingLost(jobs.Events(id), v1::JOB_STATE_CANCELLED);

  // The slots are free again: the next 2-rank job runs to the end.
  DigitsJob next{.name = "next", .epochs = 1};
  jobs.WaitForState(jobs.Submit(digits.Write(next)), v1::JOB_STATE_SUCCEEDED);
}

TEST_CASE("An agent killed mid-job: the job resumes from its checkpoint on a healthy worker",
          "[integration][job]") {
  DigitsData digits;
  Cluster cluster(kLeaseTtl);
  StartCluster(cluster, {"w1", "w2", "w3"});
  JobClient jobs(cluster.address());

  DigitsJob spec{.name = "resilient", .epochs = 8};
  std::string id = jobs.Submit(digits.Write(spec));
  v1::Job job = jobs.WaitForState(id, v1::JOB_STATE_RUNNING);
  // After the second epoch's checkpoint has reached the coordinator.
  REQUIRE(jobs.WaitFor(
      id, [](const v1::Job& j) { return j.last_epoch().epoch() >= 2 && HasArtifact(j, "checkpoints/"); },
      absl::Seconds(120)));
  job = jobs.Get(id);
  REQUIRE(job.state() == v1::JOB_STATE_RUNNING);
  std::string victim = WorkerOfRank(job, 1);
  REQUIRE(!victim.empty());
  cluster.worker(victim).Signal(SIGKILL);

  job = jobs.WaitForState(id, v1::JOB_STATE_SUCCEEDED);
  CHECK(job.restarts() == 1);
  CHECK(job.attempt() == 2);
  CHECK(Workers(job).count(victim) == 0);
  std::vector<v1::JobEvent> events = jobs.Events(id);
  CheckNothingLost(events, v1::JOB_STATE_SUCCEEDED);
  // The second attempt started after the checkpointed epochs, not from epoch 1.
  std::set<int> resumed = EndedEpochs(events, 2);
  REQUIRE(!resumed.empty());
  CHECK(*resumed.begin() >= 3);
  CHECK(*resumed.rbegin() == 8);
  CHECK(EndedEpochs(events).size() == 8);
}

TEST_CASE("An agent killed mid-job with no restarts left fails the job, naming the worker",
          "[integration][job]") {
  DigitsData digits;
  Cluster cluster(kLeaseTtl);
  StartCluster(cluster, {"w1", "w2"});
  JobClient jobs(cluster.address());

  DigitsJob spec{.name = "fragile", .epochs = 100, .max_restarts = 0};
  std::string id = jobs.Submit(digits.Write(spec));
  v1::Job job = jobs.WaitForState(id, v1::JOB_STATE_RUNNING);
  std::string victim = WorkerOfRank(job, 1);
  cluster.worker(victim).Signal(SIGKILL);

  job = jobs.WaitForState(id, v1::JOB_STATE_FAILED, absl::Seconds(60));
  INFO(job.reason());
  CHECK(absl::StrContains(job.reason(), victim));
  CheckNothingLost(jobs.Events(id), v1::JOB_STATE_FAILED);
  REQUIRE(WaitUntil([&] { return NoTrainerLeft(id); }, absl::Seconds(30)));
}

TEST_CASE("A coordinator killed mid-job and restarted finishes the job, losing nothing",
          "[integration][job]") {
  DigitsData digits;
  Cluster cluster(kLeaseTtl);
  StartCluster(cluster, {"w1", "w2"});

  DigitsJob spec{.name = "survivor", .epochs = 6};
  std::string id;
  std::string queued;
  {
    JobClient jobs(cluster.address());
    id = jobs.Submit(digits.Write(spec));
    REQUIRE(jobs.WaitFor(id, [](const v1::Job& j) { return j.last_epoch().epoch() >= 2; },
                         absl::Seconds(180)));
    DigitsJob later{.name = "later", .epochs = 1};
    queued = jobs.Submit(digits.Write(later));
  }
  cluster.server().Signal(SIGKILL);
  REQUIRE(cluster.server().Wait(absl::Seconds(10)).has_value());
  REQUIRE(cluster.StartServer());

  JobClient jobs(cluster.address());
  v1::Job job = jobs.WaitForState(id, v1::JOB_STATE_SUCCEEDED);
  CHECK(job.attempt() >= 2);
  CHECK(job.restarts() == 0);  // a coordinator restart is not the job's failure
  std::vector<v1::JobEvent> events = jobs.Events(id);
  CheckNothingLost(events, v1::JOB_STATE_SUCCEEDED);
  // Epochs the trainers finished while no coordinator listened are not in the event
  // log (their attempt had ended for the restarted coordinator), but the new attempt
  // resumed after them or redid them, and the model's history holds every epoch.
  std::set<int> before = EndedEpochs(events, 1);
  std::set<int> last = EndedEpochs(events, job.attempt());
  REQUIRE(before.count(2) == 1);
  if (!last.empty()) {  // empty when the trainers had finished all 6 during the outage
    CHECK(*last.rbegin() == 6);
    CHECK(static_cast<int>(last.size()) == 6 - *last.begin() + 1);
  }
  TempDir out;
  CommandResult downloaded = cluster.Cli({"download", id, "-o", out.path()});
  INFO(downloaded.output);
  REQUIRE(downloaded.status.code == 0);
  CHECK(nlohmann::json::parse(ReadFile(out.File("history.json")))["loss"].size() == 6);
  // The job queued before the crash is still there and runs.
  jobs.WaitForState(queued, v1::JOB_STATE_SUCCEEDED);
  REQUIRE(WaitUntil([&] { return NoTrainerLeft(id); }, absl::Seconds(30)));
}

}  // namespace
}  // namespace cohort::testing
