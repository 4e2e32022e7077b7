// The `cohort` client end to end, as a person and a script use it: the real
// coordinator, agents and trainers on loopback, and the real binary driven under a
// pseudo-terminal (`script`) for the progress bar, through pipes for plain and JSON
// output. Checks the exit codes 0 (succeeded), 1 (failed), 2 (usage, refused job),
// 3 (cancelled), 4 (unreachable) and 130 (detached), --dry-run, and that a watcher
// survives a coordinator restart without losing or repeating a line.

#include <signal.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/integration/cluster.h"
#include "tests/integration/job_client.h"
#include "tests/support/ports.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {
namespace {

const std::string kSource = COHORT_SOURCE_DIR;
const std::string kModel = kSource + "/examples/digits_cnn.keras";
constexpr char kLeaseTtl[] = "3s";

// `cohort submit MODEL --x ... --y ...` for the digits data, plus `extra`.
std::vector<std::string> SubmitDigits(const DigitsData& data, std::vector<std::string> extra) {
  std::vector<std::string> args{"submit",
                                kModel,
                                "--x",
                                data.File("x_train.npy"),
                                "--y",
                                data.File("y_train.npy"),
                                "--validation-x",
                                data.File("x_test.npy"),
                                "--validation-y",
                                data.File("y_test.npy")};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::string ShellQuote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `cohort --coordinator ADDR args...` with its stdout on a pseudo-terminal, as in
// a person's shell; `script` passes the exit code through.
CommandResult CliOnTty(Cluster& cluster, const std::vector<std::string>& args,
                       absl::Duration timeout) {
  std::vector<std::string> argv{COHORT_CLIENT_BIN, "--coordinator", cluster.address()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> quoted;
  for (const std::string& a : argv) quoted.push_back(ShellQuote(a));
  return RunCommand({"/usr/bin/script", "-qfec", absl::StrJoin(quoted, " "), "/dev/null"}, timeout,
                    {{"TERM", "xterm"}});
}

// A `cohort` started in the background (a watcher), stopped when the test ends.
std::unique_ptr<Process> CliInBackground(Cluster& cluster, const std::vector<std::string>& args,
                                         const std::string& log) {
  std::vector<std::string> argv{COHORT_CLIENT_BIN, "--coordinator", cluster.address()};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<Process>(argv, log);
}

std::string JobId(const std::string& text) {
  std::smatch match;
  if (!std::regex_search(text, match, std::regex("job-[0-9a-f]{12}"))) return "";
  return match.str();
}

// The job's state as `cohort status -o json` reports it ("JOB_STATE_RUNNING").
std::string StateOf(Cluster& cluster, const std::string& id) {
  CommandResult r = cluster.Cli({"status", id, "-o", "json"});
  if (r.status.code != 0) return "";
  nlohmann::json job = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  return job.is_object() ? job.value("state", "") : "";
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST_CASE("cohort submit --follow on a terminal draws Keras' progress and exits 0",
          "[integration][job][cli]") {
  DigitsData data;
  Cluster cluster(kLeaseTtl);
  REQUIRE(cluster.StartServer());
  cluster.StartWorker("w1", 1);
  cluster.StartWorker("w2", 1);
  REQUIRE(cluster.WaitForWorkerState("w1", "alive"));
  REQUIRE(cluster.WaitForWorkerState("w2", "alive"));

  CommandResult follow = CliOnTty(
      cluster,
      SubmitDigits(data, {"--epochs", "3", "--batch-size", "64", "--workers", "2", "--follow"}),
      absl::Seconds(300));
  INFO(follow.output);
  REQUIRE(follow.status.code == 0);
  const std::string& tty = follow.output;
  const std::string id = JobId(tty);
  REQUIRE(!id.empty());
  // Cluster lines, then one bar per epoch, redrawn in place, finished with its metrics.
  CHECK(absl::StrContains(tty, id + ": QUEUED"));
  CHECK(absl::StrContains(tty, id + ": STARTING (attempt 1)"));
  CHECK(std::regex_search(tty, std::regex(id + ": attempt 1 on 2 ranks: rank 0 on w[12] \\(slot 0\\), "
                                                "rank 1 on w[12] \\(slot 0\\)")));
  CHECK(absl::StrContains(tty, id + ": SUCCEEDED"));
  CHECK(absl::StrContains(tty, "\r\x1b[2K"));  // a bar redrawn
  for (int epoch = 1; epoch <= 3; ++epoch) {
    INFO("epoch " << epoch);
    // 1437 rows, batch 64: 23 steps. Keras' numbers: 4 decimals.
    CHECK(std::regex_search(
        tty, std::regex(absl::StrCat("Epoch ", epoch,
                                     "/3 (\x1b\\[32m)?(?:━){20}(\x1b\\[0m)? 23/23 - \\d+s \\d+m?s/step - "
                                     "accuracy: \\d\\.\\d{4} - loss: \\d\\.\\d{4} - val_accuracy: "
                                     "\\d\\.\\d{4} - val_loss: \\d\\.\\d{4} - \\d+ samples/s"))));
  }

  // The same job through a pipe: plain lines, no redraws; the job's exit code again.
  CommandResult plain = cluster.Cli({"watch", id});
  INFO(plain.output);
  CHECK(plain.status.code == 0);
  CHECK(plain.out.find('\r') == std::string::npos);
  CHECK(plain.out.find('\x1b') == std::string::npos);
  CHECK(Count(plain.out, "Epoch ") == 3);
  CHECK(std::regex_search(plain.out, std::regex("Epoch 3/3 - 23/23 - \\d+s \\d+m?s/step - accuracy: ")));

  // JSON: one object per line, in sequence, ending with the final state change.
  CommandResult json = cluster.Cli({"watch", id, "-o", "json"});
  CHECK(json.status.code == 0);
  std::vector<std::string> lines = absl::StrSplit(json.out, '\n', absl::SkipEmpty());
  REQUIRE(lines.size() > 6);
  int64_t sequence = 0;
  int epochs = 0, steps = 0;
  nlohmann::json last;
  for (const std::string& line : lines) {
    INFO(line);
    last = nlohmann::json::parse(line);
    CHECK(last["job_id"] == id);
    CHECK(std::stoll(last["sequence"].get<std::string>()) == ++sequence);
    if (last.contains("epoch")) ++epochs;
    if (last.contains("step")) ++steps;
  }
  CHECK(epochs == 3);
  CHECK(steps >= 3);
  CHECK(last["state_change"]["to"] == "JOB_STATE_SUCCEEDED");

  // Logs of a finished job print and exit 0.
  CommandResult logs = cluster.Cli({"logs", id});
  CHECK(logs.status.code == 0);
  CHECK(absl::StrContains(logs.out, id + ": SUCCEEDED"));

  // Download: model.keras and history.json, whole; a second run finds them there.
  TempDir out;
  CommandResult downloaded = cluster.Cli({"download", id, "-o", out.File("model")});
  INFO(downloaded.output);
  REQUIRE(downloaded.status.code == 0);
  CHECK(ReadFile(out.File("model/model.keras")).substr(0, 2) == "PK");
  nlohmann::json history = nlohmann::json::parse(ReadFile(out.File("model/history.json")));
  CHECK(history["loss"].size() == 3);
  CHECK_FALSE(std::filesystem::exists(out.File("model/model.keras.part")));
  CommandResult again = cluster.Cli({"download", id, "-o", out.File("model")});
  CHECK(again.status.code == 0);
  // model.keras, history.json and the two TensorBoard files (train/, validation/).
  CHECK(Count(again.out, "already there") == 4);

  CommandResult status = cluster.Cli({"status", id});
  CHECK(absl::StrContains(status.out, "state:      SUCCEEDED"));
  CHECK(absl::StrContains(status.out, "model.keras ("));
  CommandResult list = cluster.Cli({"list", "--state", "succeeded"});
  CHECK(absl::StrContains(list.out, id));
}

TEST_CASE("cohort submit --dry-run prints the resolved job, and refusals exit 2 naming the field",
          "[integration][cli]") {
  DigitsData data;
  Cluster cluster;
  REQUIRE(cluster.StartServer());

  CommandResult dry = cluster.Cli(SubmitDigits(data, {"--epochs", "3", "--dry-run"}));
  INFO(dry.output);
  REQUIRE(dry.status.code == 0);
  // Every default filled in, and the compile settings the .keras file was saved with.
  CHECK(absl::StrContains(dry.out, "name: \"digits_cnn\""));
  CHECK(absl::StrContains(dry.out, "model: \"" + kModel + "\""));
  CHECK(absl::StrContains(dry.out, "  epochs: 3\n  batch_size: 32\n"));
  CHECK(absl::StrContains(dry.out, "  precision: float32\n"));
  CHECK(absl::StrContains(dry.out, "loss: {name: sparse_categorical_crossentropy}"));
  CHECK(absl::StrContains(dry.out, "metrics: [accuracy]"));
  CHECK(absl::StrContains(dry.out, "max_restarts: 3"));
  // A flag overrides the file's setting.
  CommandResult sgd = cluster.Cli(SubmitDigits(data, {"--optimizer", "sgd", "--dry-run"}));
  CHECK(absl::StrContains(sgd.out, "name: sgd"));
  // Through the coordinator's protobuf and back.
  CommandResult bf16 = cluster.Cli(SubmitDigits(data, {"--precision", "mixed_bfloat16", "--dry-run"}));
  CHECK(absl::StrContains(bf16.out, "  precision: mixed_bfloat16\n"));
  // Nothing was stored.
  CHECK(absl::StrContains(cluster.Cli({"list"}).out, "(no jobs)"));

  // The coordinator's refusal, as one line naming the field.
  CommandResult refused =
      cluster.Cli({"submit", kModel, "--x", data.File("x_test.npy"), "--y", data.File("y_train.npy")});
  CHECK(refused.status.code == 2);
  CHECK(refused.output == "cohort: error: data.x, data.y: x has 360 rows but y has 1437\n");
  // The client's own: a bad flag value, an unknown flag.
  CommandResult bad = cluster.Cli(SubmitDigits(data, {"--epochs", "ten"}));
  CHECK(bad.status.code == 2);
  CHECK(bad.output == "cohort: error: --epochs: must be an integer >= 1, got 'ten'\n");
  CHECK(cluster.Cli(SubmitDigits(data, {"--epoch", "3"})).status.code == 2);
  CHECK(cluster.Cli({"watch"}).status.code == 2);
  // An unknown job is a failed command.
  CommandResult unknown = cluster.Cli({"watch", "job-000000000000"});
  CHECK(unknown.status.code == 1);
  CHECK(absl::StrContains(unknown.output, "cohort: error: "));
}

TEST_CASE("Watchers exit 3 on cancel, reconnect across a coordinator restart, detach on Ctrl-C",
          "[integration][cli]") {
  DigitsData data;
  Cluster cluster;
  REQUIRE(cluster.StartServer());
  // No worker: the job stays QUEUED until it is cancelled.
  CommandResult submitted = cluster.Cli(SubmitDigits(data, {"--name", "waits"}));
  INFO(submitted.output);
  REQUIRE(submitted.status.code == 0);
  const std::string id = JobId(submitted.out);
  REQUIRE(submitted.out == id + "\n");

  TempDir logs;
  std::unique_ptr<Process> follower =
      CliInBackground(cluster, {"watch", id, "-o", "plain"}, logs.File("follower.log"));
  std::unique_ptr<Process> detacher =
      CliInBackground(cluster, {"logs", id, "-f"}, logs.File("detacher.log"));
  REQUIRE(WaitUntil([&] { return absl::StrContains(follower->Output(), id + ": QUEUED"); },
                    absl::Seconds(10)));
  REQUIRE(WaitUntil([&] { return absl::StrContains(detacher->Output(), id + ": QUEUED"); },
                    absl::Seconds(10)));

  // Ctrl-C detaches: the job is untouched and the way back is printed.
  detacher->Signal(SIGINT);
  std::optional<ExitStatus> detached = detacher->Wait(absl::Seconds(10));
  REQUIRE(detached.has_value());
  CHECK(detached->code == 130);
  CHECK(absl::StrContains(detacher->Output(), "Reattach with: cohort watch " + id));
  CHECK(StateOf(cluster, id) == "JOB_STATE_QUEUED");

  // The coordinator restarts under the follower, which reconnects and goes on.
  REQUIRE(cluster.StopServer().code == 0);
  REQUIRE(WaitUntil([&] { return absl::StrContains(follower->Output(), "reconnecting"); },
                    absl::Seconds(10)));
  REQUIRE(cluster.StartServer());
  REQUIRE(follower->Running());

  CommandResult cancelled = cluster.Cli({"cancel", id, "--reason", "not needed"});
  CHECK(cancelled.status.code == 0);
  CHECK(cancelled.out == id + ": CANCELLED\n");
  std::optional<ExitStatus> exit = follower->Wait(absl::Seconds(20));
  REQUIRE(exit.has_value());
  const std::string output = follower->Output();
  INFO(output);
  CHECK(exit->code == 3);
  CHECK(absl::StrContains(output, "reconnected"));
  CHECK(Count(output, id + ": QUEUED") == 1);  // resumed after it, not replayed
  CHECK(absl::StrContains(output, id + ": CANCELLED: not needed"));

  // A watch of the finished job replays it and exits with its code at once.
  CHECK(cluster.Cli({"watch", id}).status.code == 3);
  CHECK(cluster.Cli({"logs", id}).status.code == 0);
}

TEST_CASE("A job that fails makes its watcher exit 1 with the reason", "[integration][job][cli]") {
  DigitsData data;
  Cluster cluster(kLeaseTtl);
  REQUIRE(cluster.StartServer());
  cluster.StartWorker("w1", 1);
  REQUIRE(cluster.WaitForWorkerState("w1", "alive"));

  // Enough epochs to be running when the agent is killed, and no restart allowed.
  CommandResult submitted = cluster.Cli(SubmitDigits(
      data, {"--epochs", "200", "--batch-size", "16", "--max-restarts", "0", "--upload"}));
  INFO(submitted.output);
  REQUIRE(submitted.status.code == 0);
  const std::string id = JobId(submitted.out);
  REQUIRE(!id.empty());
  TempDir logs;
  std::unique_ptr<Process> follower =
      CliInBackground(cluster, {"watch", id}, logs.File("follower.log"));
  REQUIRE(WaitUntil([&] { return absl::StrContains(follower->Output(), "Epoch 1/200"); },
                    absl::Seconds(120)));

  cluster.worker("w1").Signal(SIGKILL);
  std::optional<ExitStatus> exit = follower->Wait(absl::Seconds(60));
  REQUIRE(exit.has_value());
  const std::string output = follower->Output();
  INFO(output);
  CHECK(exit->code == 1);
  // The reason is the job's, filled in when the final event carries none.
  CHECK(std::regex_search(output, std::regex(id + ": FAILED: .*'w1'")));
  CHECK(StateOf(cluster, id) == "JOB_STATE_FAILED");
  CommandResult download = cluster.Cli({"download", id, "-o", cluster.dir().File("download")});
  CHECK(download.status.code == 1);
  CHECK(absl::StrContains(download.output, "has no artifact 'model.keras'"));
}

TEST_CASE("Without a coordinator every command exits 4", "[integration][cli]") {
  Cluster nowhere;  // never started: nothing listens on its port
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"list"},
                                             {"status", "job-000000000000"},
                                             {"watch", "job-000000000000"},
                                             {"submit", kModel, "--x", "/tmp/x.npy", "--y", "/tmp/y.npy"}}) {
    CommandResult r = nowhere.Cli(args);
    INFO(absl::StrJoin(args, " ") << "\n" << r.output);
    CHECK(r.status.code == 4);
    CHECK(absl::StrContains(r.output, "cohort: error: cannot reach the coordinator at " +
                                          nowhere.address()));
  }
}

}  // namespace
}  // namespace cohort::testing
