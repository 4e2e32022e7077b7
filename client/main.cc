// cohort: the command-line client. docs/cli.md describes every command.

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "client/call.h"
#include "client/download.h"
#include "client/exit_codes.h"
#include "client/interrupt.h"
#include "client/job_commands.h"
#include "client/job_format.h"
#include "client/submit_command.h"
#include "client/trace_command.h"
#include "client/watch.h"
#include "client/workers_command.h"
#include "common/address.h"
#include "common/duration.h"
#include "common/version.h"
#include "proto/channel.h"

namespace {

using namespace cohort::client;

// A flag whose absence matters (the model file's setting applies): nullopt unless given.
CLI::Option* AddOptional(CLI::App* app, const std::string& name, std::optional<std::string>* out,
                         const std::string& help) {
  return app->add_option_function<std::string>(
      name, [out](const std::string& value) { *out = value; }, help);
}

void AddSubmitFlags(CLI::App* submit, SubmitOptions& o) {
  SubmitFlags& f = o.flags;
  submit->add_option("JOB", f.target, "a JOB.yaml, or a MODEL.keras (or MODEL.json) with --x/--y")
      ->required();
  // Data
  AddOptional(submit, "--x", &f.x, "training inputs (.npy, or .npz with --key)")->type_name("PATH")->group("Data");
  AddOptional(submit, "--y", &f.y, "training targets (.npy, or .npz with --y-key)")->type_name("PATH")->group("Data");
  AddOptional(submit, "--key", &f.x_key, "the member of an .npz --x")->type_name("NAME")->group("Data");
  AddOptional(submit, "--y-key", &f.y_key, "the member of an .npz --y (default file: --x's)")
      ->type_name("NAME")->group("Data");
  AddOptional(submit, "--validation-x", &f.validation_x, "validation inputs")->type_name("PATH")->group("Data");
  AddOptional(submit, "--validation-y", &f.validation_y, "validation targets")->type_name("PATH")->group("Data");
  AddOptional(submit, "--validation-key", &f.validation_x_key, "the member of an .npz --validation-x")
      ->type_name("NAME")->group("Data");
  AddOptional(submit, "--validation-y-key", &f.validation_y_key,
              "the member of an .npz --validation-y")
      ->type_name("NAME")->group("Data");
  AddOptional(submit, "--validation-split", &f.validation_split,
              "fraction of the rows held out for validation, in [0, 1)")
      ->type_name("FRACTION")->group("Data");
  // model.fit
  AddOptional(submit, "--epochs", &f.epochs, "epochs (default 1)")->type_name("N")->group("Fit");
  AddOptional(submit, "--batch-size", &f.batch_size, "global batch size (default 32)")->type_name("N")->group("Fit");
  submit->add_flag_callback("--shuffle", [&f] { f.shuffle = true; }, "shuffle every epoch (default)")
      ->group("Fit");
  submit->add_flag_callback("--no-shuffle", [&f] { f.shuffle = false; }, "do not shuffle")
      ->group("Fit");
  AddOptional(submit, "--seed", &f.seed, "shuffling seed (default 0)")->type_name("N")->group("Fit");
  AddOptional(submit, "--precision", &f.precision,
              "float32 (default) or mixed_bfloat16: the layers' products in bfloat16")
      ->type_name("NAME")->group("Fit");
  // model.compile
  AddOptional(submit, "--optimizer", &f.optimizer, "sgd, adam, adamw, rmsprop, adagrad")
      ->type_name("NAME")->group("Compile (default: the model file's)");
  AddOptional(submit, "--learning-rate", &f.learning_rate, "the optimizer's learning rate")
      ->type_name("RATE")->group("Compile (default: the model file's)");
  AddOptional(submit, "--loss", &f.loss, "e.g. sparse_categorical_crossentropy, mse")
      ->type_name("NAME")->group("Compile (default: the model file's)");
  submit->add_flag_callback("--from-logits", [&f] { f.from_logits = true; },
                            "the loss takes logits")
      ->group("Compile (default: the model file's)");
  submit
      ->add_option_function<std::vector<std::string>>(
          "--metrics", [&f](const std::vector<std::string>& v) { f.metrics = v; },
          "comma-separated, e.g. accuracy,mae")
      ->type_name("NAMES")
      ->delimiter(',')
      ->group("Compile (default: the model file's)");
  // Resources
  AddOptional(submit, "--workers", &f.workers, "ranks (default 1)")->type_name("N")->group("Resources");
  AddOptional(submit, "--device", &f.device, "cpu or cuda (default cpu)")->type_name("cpu|cuda")->group("Resources");
  AddOptional(submit, "--priority", &f.priority, "higher runs first (default 0)")->type_name("N")->group("Resources");
  AddOptional(submit, "--max-restarts", &f.max_restarts, "restarts after failures (default 3)")
      ->type_name("N")->group("Resources");
  AddOptional(submit, "--checkpoint-every", &f.checkpoint_every,
              "checkpoint every N epochs; 0: only at the end (default 1)")
      ->type_name("EPOCHS")->group("Resources");
  AddOptional(submit, "--checkpoint-keep", &f.checkpoint_keep, "checkpoints kept (default 2)")
      ->type_name("N")->group("Resources");
  AddOptional(submit, "--name", &f.name, "the job's name (default: the file's stem)")
      ->type_name("NAME")->group("Resources");
  submit->add_flag_callback("--trace", [&f] { f.trace = true; },
                            "every rank records a step timeline (see cohort trace)")
      ->group("Resources");
  // The submission itself
  submit->add_flag("--dry-run", o.dry_run, "print the resolved job; submit nothing");
  submit->add_flag("--upload", o.upload,
                   "upload the model and data (default: send paths the workers can read)");
  submit->add_flag("-f,--follow", o.follow, "watch the job until it ends");
  submit->add_option("--idempotency-key", o.idempotency_key,
                     "a retried submit with the same key returns the same job (default: random)");
  submit->add_option("-o,--output", o.output, "with --follow: auto, tty, plain or json")
      ->check(CLI::IsMember({"auto", "tty", "plain", "json"}))
      ->capture_default_str();
}

OutputFormat Format(const std::string& output) {
  return output == "json" ? OutputFormat::kJson : OutputFormat::kTable;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cohort: submit, watch and manage Cohort training jobs"};
  app.require_subcommand(1);
  const char* env = std::getenv("COHORT_COORDINATOR");
  std::string coordinator = env && *env ? env : "127.0.0.1:7070";
  std::string timeout = "5s";
  app.add_option("--coordinator", coordinator, "coordinator HOST:PORT (env COHORT_COORDINATOR)")
      ->capture_default_str();
  app.add_option("--timeout", timeout, "deadline of each unary call to the coordinator")
      ->capture_default_str();
  // docs/security.md: the token and TLS settings of a coordinator that asks for them.
  auto env_or_empty = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value != nullptr ? value : "");
  };
  cohort::ChannelSecurityFiles security{.token = env_or_empty("COHORT_TOKEN"),
                                        .token_file = env_or_empty("COHORT_TOKEN_FILE"),
                                        .tls_ca = env_or_empty("COHORT_TLS_CA"),
                                        .tls_server_name = env_or_empty("COHORT_TLS_SERVER_NAME")};
  CLI::Option* token_flag = app.add_option("--token", security.token,
                 "bearer token for the coordinator (env COHORT_TOKEN; prefer --token-file: "
                 "a flag shows in ps)")
      ->group("Security");
  CLI::Option* token_file_flag = app.add_option("--token-file", security.token_file,
                 "a file holding the token on its first line (env COHORT_TOKEN_FILE)")
      ->group("Security");
  app.add_option("--tls-ca", security.tls_ca,
                 "PEM CA of the coordinator's certificate: connect with TLS (env COHORT_TLS_CA)")
      ->group("Security");
  app.add_option("--tls-server-name", security.tls_server_name,
                 "the name the coordinator's certificate carries, when it is not the "
                 "--coordinator host (env COHORT_TLS_SERVER_NAME)")
      ->group("Security");

  CLI::App* version = app.add_subcommand("version", "print the client's version");

  CLI::App* workers = app.add_subcommand("workers", "list the workers of the cluster");
  std::string workers_output = "table";
  workers->add_option("-o,--output", workers_output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  CLI::App* submit = app.add_subcommand("submit", "submit a training job");
  SubmitOptions submit_options;
  AddSubmitFlags(submit, submit_options);

  std::string job_id;
  CLI::App* status = app.add_subcommand("status", "show a job");
  status->add_option("JOB", job_id, "the job id")->required();
  std::string status_output = "table";
  status->add_option("-o,--output", status_output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  CLI::App* list = app.add_subcommand("list", "list jobs");
  std::vector<std::string> list_states;
  list->add_option("--state", list_states, "only jobs in these states (repeat, or comma-separated)")
      ->delimiter(',');
  std::string list_output = "table";
  list->add_option("-o,--output", list_output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  CLI::App* cancel = app.add_subcommand("cancel", "cancel a job");
  cancel->add_option("JOB", job_id, "the job id")->required();
  std::string cancel_reason;
  cancel->add_option("--reason", cancel_reason, "why (shown in the job's status)");
  std::string cancel_output = "table";
  cancel->add_option("-o,--output", cancel_output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  CLI::App* download = app.add_subcommand("download", "download a job's trained model and history");
  DownloadOptions download_options;
  download->add_option("JOB", download_options.job_id, "the job id")->required();
  download->add_option("-o,--output", download_options.out_dir, "directory to write into")
      ->capture_default_str();
  download->add_option("--name", download_options.names,
                       "an artifact to download, or a folder ending in / (repeatable; default "
                       "model.keras, history.json and the tensorboard/ files)");

  CLI::App* trace = app.add_subcommand(
      "trace", "merge the step timelines of a job submitted with --trace into one Chrome trace");
  TraceOptions trace_options;
  trace->add_option("JOB", trace_options.job_id, "the job id")->required();
  trace->add_option("-o,--output", trace_options.out_path, "the file to write")
      ->capture_default_str();

  CLI::App* watch = app.add_subcommand("watch", "follow a job's progress until it ends");
  watch->add_option("JOB", job_id, "the job id")->required();
  std::string watch_output = "auto";
  watch->add_option("-o,--output", watch_output, "auto, tty, plain or json")
      ->check(CLI::IsMember({"auto", "tty", "plain", "json"}))
      ->capture_default_str();

  CLI::App* logs = app.add_subcommand("logs", "print a job's log lines");
  logs->add_option("JOB", job_id, "the job id")->required();
  bool logs_follow = false;
  logs->add_flag("-f,--follow", logs_follow, "keep printing until the job ends");
  std::string logs_output = "text";
  logs->add_option("-o,--output", logs_output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }

  if (version->parsed()) {
    std::printf("cohort %s\n", cohort::kVersion);
    return kExitOk;
  }
  Connection connection;
  absl::StatusOr<cohort::HostPort> address = cohort::ParseHostPort(coordinator);
  absl::StatusOr<absl::Duration> deadline = cohort::ParsePositiveDuration(timeout, "--timeout");
  for (const absl::Status& s : {address.status(), deadline.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "cohort: error: %s\n", std::string(s.message()).c_str());
      return kExitUsage;
    }
  }
  connection.coordinator = *address;
  connection.timeout = *deadline;
  // First of --token, --token-file, COHORT_TOKEN, COHORT_TOKEN_FILE.
  if (token_file_flag->count() > 0 && token_flag->count() == 0) security.token.clear();
  if (!security.token.empty()) security.token_file.clear();
  absl::StatusOr<cohort::ChannelSecurity> loaded = cohort::LoadChannelSecurity(security);
  if (!loaded.ok()) {
    std::fprintf(stderr, "cohort: error: %s\n", std::string(loaded.status().message()).c_str());
    return kExitUsage;
  }
  connection.security = *std::move(loaded);

  if (workers->parsed()) return RunWorkersCommand(connection, Format(workers_output));
  if (status->parsed()) return RunStatusCommand(connection, job_id, Format(status_output));
  if (cancel->parsed()) return RunCancelCommand(connection, job_id, cancel_reason, Format(cancel_output));
  if (download->parsed()) return RunDownloadCommand(connection, download_options);
  if (trace->parsed()) return RunTraceCommand(connection, trace_options);
  if (list->parsed()) {
    std::vector<cohort::v1::JobState> states;
    for (const std::string& name : list_states) {
      std::optional<cohort::v1::JobState> state = JobStateFromName(name);
      if (!state) {
        std::fprintf(stderr,
                     "cohort: error: --state: unknown state '%s' (queued, starting, running, "
                     "restarting, succeeded, failed, cancelled)\n",
                     name.c_str());
        return kExitUsage;
      }
      states.push_back(*state);
    }
    return RunListCommand(connection, states, Format(list_output));
  }
  // The commands that watch a job take Ctrl-C as "detach". The watcher blocks the
  // signals before gRPC starts its threads, so only its thread receives them.
  InterruptWatcher interrupt;
  if (submit->parsed()) {
    std::error_code ec;
    submit_options.cwd = std::filesystem::current_path(ec).string();
    return RunSubmitCommand(connection, submit_options, &interrupt);
  }
  if (watch->parsed()) {
    WatchOptions options;
    options.job_id = job_id;
    options.style = StyleFromFlag(watch_output, &options.color);
    options.columns = TerminalColumns();
    return WatchJob(connection, options, interrupt);
  }
  if (logs->parsed()) {
    WatchOptions options;
    options.job_id = job_id;
    options.style = logs_output == "json" ? ProgressStyle::kJson : ProgressStyle::kLogs;
    options.logs_only = true;
    options.follow = logs_follow;
    return WatchJob(connection, options, interrupt);
  }
  return kExitUsage;
}
