// Observability end to end (issue 9): a real coordinator and agent started with
// --metrics-listen and --log-format json run a digits job. Both endpoints pass
// `promtool check metrics` and show the job (the coordinator: jobs, queue, workers,
// scheduling latency, RPCs; the agent: the rank's step statistics while it runs); every
// log line of both daemons is a JSON object, the agent's lines about the rank carry its
// job, attempt and rank; and the job's TensorBoard files come down with `cohort
// download` and read back with TensorBoard's reader.

#include <signal.h>

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/common/metrics/promtool.h"
#include "tests/common/zip/python.h"
#include "tests/integration/job_client.h"
#include "tests/support/http_get.h"
#include "tests/support/ports.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {
namespace {

const std::string kSource = COHORT_SOURCE_DIR;
constexpr char kPython[] = COHORT_VENV_PYTHON;

std::string Metrics(int port) { return HttpBody(HttpGet(port, "/metrics")); }

// The value of the sample `series` (name and labels exactly as exposed), or -1.
double Sample(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, series + " ")) return std::stod(std::string(line.substr(series.size() + 1)));
  }
  return -1;
}

// Every non-empty line of a daemon's log is a JSON object with the four fields.
std::vector<nlohmann::json> JsonLines(const std::string& log, const std::string& who) {
  std::vector<nlohmann::json> lines;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipWhitespace())) {
    INFO(who << " line: " << line);
    nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
    REQUIRE(j.is_object());
    CHECK(j.contains("time"));
    CHECK(j.contains("level"));
    CHECK(j.contains("logger"));
    CHECK(j.contains("message"));
    lines.push_back(std::move(j));
  }
  return lines;
}

TEST_CASE("Metrics endpoints pass promtool, logs are JSON, TensorBoard files download",
          "[integration][observability]") {
  TempDir dir;
  {
    CommandResult r = RunCommand({kPython, kSource + "/examples/make_digits.py", dir.File("data")},
                                 absl::Seconds(180));
    INFO(r.output);
    REQUIRE(r.status.code == 0);
  }
  const int port = FreePort(), server_metrics = FreePort(), worker_metrics = FreePort();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  Process server({COHORT_SERVER_BIN, "--listen", address, "--data-dir", dir.File("server"),
                  "--lease-ttl", "3s", "--log-format", "json", "--metrics-listen",
                  absl::StrCat("127.0.0.1:", server_metrics)},
                 dir.File("server.log"));
  REQUIRE(WaitUntil([&] { return !Metrics(server_metrics).empty(); }, absl::Seconds(30)));
  Process worker({COHORT_WORKER_BIN, "--coordinator", address, "--name", "w1", "--slots", "1",
                  "--work-dir", dir.File("w1"), "--log-format", "json", "--metrics-listen",
                  absl::StrCat("127.0.0.1:", worker_metrics)},
                 dir.File("w1.log"));
  REQUIRE(WaitUntil([&] { return Sample(Metrics(server_metrics), "cohort_workers{state=\"alive\"}") == 1; },
                    absl::Seconds(30)));

  DigitsJob spec;
  spec.workers = 1;
  spec.epochs = 3;
  WriteFile(dir.File("job.yaml"), DigitsJobYaml(spec, dir.File("data")));
  JobClient jobs(address);
  const std::string id = jobs.Submit(dir.File("job.yaml"));

  // The agent's metrics show the rank while it trains.
  const std::string rank = absl::StrCat("{job=\"", id, "\",attempt=\"1\",rank=\"0\"}");
  std::string during;
  bool seen = WaitUntil(
      [&] {
        during = Metrics(worker_metrics);
        return Sample(during, "cohort_rank_steps_total" + rank) > 0;
      },
      absl::Seconds(240));
  INFO(during);
  REQUIRE(seen);
  CHECK(Sample(during, "cohort_agent_ranks") == 1);
  CHECK(Sample(during, "cohort_rank_samples_per_second" + rank) > 0);
  CHECK(Sample(during, "cohort_rank_step_seconds" + rank) > 0);
  CHECK(Sample(during, "cohort_rank_data_wait_seconds" + rank) >= 0);
  CHECK(Sample(during, "cohort_rank_all_reduce_seconds" + rank) >= 0);
  CHECK(Sample(during, "cohort_rank_all_reduce_bytes_total" + rank) >= 0);
  CHECK(Sample(during, "cohort_rank_resident_memory_bytes" + rank) > 1e6);
  if (PromtoolPath().empty()) {
    WARN("promtool is not installed (Debian package prometheus): not checking the format");
  } else {
    CHECK(PromtoolProblems(during) == "");
  }

  jobs.WaitForState(id, v1::JOB_STATE_SUCCEEDED);
  std::string coordinator;
  REQUIRE(WaitUntil(
      [&] {
        coordinator = Metrics(server_metrics);
        return Sample(coordinator, "cohort_jobs{state=\"succeeded\"}") == 1;
      },
      absl::Seconds(10)));
  INFO(coordinator);
  CHECK(Sample(coordinator, "cohort_jobs{state=\"queued\"}") == 0);
  CHECK(Sample(coordinator, "cohort_queue_length") == 0);
  CHECK(Sample(coordinator, "cohort_scheduling_latency_seconds_count") == 1);
  CHECK(Sample(coordinator,
               "cohort_grpc_server_handled_total{grpc_service=\"cohort.v1.JobService\","
               "grpc_method=\"SubmitJob\",grpc_type=\"unary\",grpc_code=\"OK\"}") == 1);
  CHECK(Sample(coordinator, "cohort_worker_slots{worker=\"w1\",state=\"total\"}") == 1);
  if (!PromtoolPath().empty()) CHECK(PromtoolProblems(coordinator) == "");
  // The rank's series went with it.
  REQUIRE(WaitUntil([&] { return Sample(Metrics(worker_metrics), "cohort_agent_ranks") == 0; },
                    absl::Seconds(10)));
  CHECK(Sample(Metrics(worker_metrics), "cohort_rank_steps_total" + rank) == -1);

  // `cohort status` draws the loss curve so far.
  CommandResult status = RunCommand({COHORT_CLIENT_BIN, "--coordinator", address, "status", id});
  INFO(status.output);
  CHECK(status.status.code == 0);
  CHECK(absl::StrContains(status.out, "epoch 1..3"));
  CHECK(absl::StrContains(status.out, "● loss  ○ val_loss"));

  // The TensorBoard curves are artifacts of the job.
  TempDir out;
  CommandResult downloaded = RunCommand({COHORT_CLIENT_BIN, "--coordinator", address, "download",
                                         id, "-o", out.path()},
                                        absl::Seconds(60));
  INFO(downloaded.output);
  REQUIRE(downloaded.status.code == 0);
  nlohmann::json runs = nlohmann::json::parse(
      RunPython("tests/common/tensorboard/read_events.py", {out.File("tensorboard")}))["runs"];
  REQUIRE(runs.contains("train"));
  REQUIRE(runs.contains("validation"));
  CHECK(runs["train"]["scalars"]["epoch_loss"].size() == 3);
  CHECK(runs["validation"]["scalars"]["epoch_loss"].size() == 3);

  worker.Signal(SIGTERM);
  REQUIRE(worker.Wait(absl::Seconds(30)).has_value());
  server.Signal(SIGTERM);
  REQUIRE(server.Wait(absl::Seconds(30)).has_value());
  std::vector<nlohmann::json> server_lines = JsonLines(server.Output(), "server");
  std::vector<nlohmann::json> worker_lines = JsonLines(worker.Output(), "worker");
  CHECK(server_lines.size() >= 2);
  int about_rank = 0;
  for (const nlohmann::json& j : worker_lines) {
    if (j.value("job", "") == id) {
      about_rank += 1;
      CHECK(j["attempt"] == 1);
      CHECK(j["rank"] == 0);
    }
  }
  CHECK(about_rank >= 1);
}

TEST_CASE("gRPC's own log lines are JSON lines too", "[integration][observability]") {
  TempDir dir;
  const int port = FreePort(), metrics = FreePort();
  // GRPC_TRACE=api makes gRPC log every call it takes: lines of its own to route.
  Process server({COHORT_SERVER_BIN, "--listen", absl::StrCat("127.0.0.1:", port), "--data-dir",
                  dir.File("server"), "--log-format", "json", "--metrics-listen",
                  absl::StrCat("127.0.0.1:", metrics)},
                 dir.File("server.log"), {{"GRPC_VERBOSITY", "INFO"}, {"GRPC_TRACE", "api"}});
  REQUIRE(WaitUntil([&] { return !Metrics(metrics).empty(); }, absl::Seconds(30)));
  CommandResult workers = RunCommand({COHORT_CLIENT_BIN, "--coordinator",
                                      absl::StrCat("127.0.0.1:", port), "workers"});
  INFO(workers.output);
  CHECK(workers.status.code == 0);
  server.Signal(SIGTERM);
  REQUIRE(server.Wait(absl::Seconds(30)).has_value());
  int from_grpc = 0;
  for (const nlohmann::json& j : JsonLines(server.Output(), "server")) {
    from_grpc += absl::StartsWith(j["message"].get<std::string>(), "grpc: ");
  }
  CHECK(from_grpc > 0);
}

TEST_CASE("Bad observability flags are refused with a named error", "[integration][observability]") {
  TempDir dir;
  const std::string listen = absl::StrCat("127.0.0.1:", FreePort());
  CommandResult format = RunCommand({COHORT_SERVER_BIN, "--listen", listen, "--data-dir",
                                     dir.File("a"), "--log-format", "xml"});
  CHECK(format.status.code != 0);
  CHECK(absl::StrContains(format.output, "--log-format: 'xml' is not one of text, json"));
  CommandResult worker_format = RunCommand({COHORT_WORKER_BIN, "--coordinator", listen,
                                            "--log-format", "yaml"});
  CHECK(worker_format.status.code != 0);
  CHECK(absl::StrContains(worker_format.output, "--log-format: 'yaml' is not one of text, json"));
  CommandResult address = RunCommand({COHORT_SERVER_BIN, "--listen", listen, "--data-dir",
                                      dir.File("b"), "--metrics-listen", "nowhere"});
  CHECK(address.status.code != 0);
  CHECK(absl::StrContains(address.output, "--metrics-listen"));

  // A busy metrics port fails the coordinator before it creates anything.
  const int busy = FreePort();
  Process first({COHORT_SERVER_BIN, "--listen", absl::StrCat("127.0.0.1:", FreePort()), "--data-dir",
                 dir.File("first"), "--metrics-listen", absl::StrCat("127.0.0.1:", busy)},
                dir.File("first.log"));
  REQUIRE(WaitUntil([&] { return !Metrics(busy).empty(); }, absl::Seconds(30)));
  CommandResult second = RunCommand({COHORT_SERVER_BIN, "--listen", listen, "--data-dir",
                                     dir.File("second"), "--metrics-listen",
                                     absl::StrCat("127.0.0.1:", busy)});
  CHECK(second.status.code != 0);
  CHECK(absl::StrContains(second.output, absl::StrCat("--metrics-listen 127.0.0.1:", busy)));
  CHECK_FALSE(std::filesystem::exists(dir.File("second")));
}

}  // namespace
}  // namespace cohort::testing
