#pragma once

// The trainer's commands of cohort-worker, as CLI11 subcommands. Torch-free header.
//
// `cohort-worker train JOB.yaml --rank R --world N --rendezvous URL --out DIR
// [--device cpu|cuda] [--resume] [--trace] [--profile-epoch E]`: one rank of a job. Ranks of one run meet through the
// store the rendezvous URL names: `file://DIR` (a directory they share; standalone
// runs) or, when the caller's opener knows it, `coordinator://HOST:PORT/JOB/ATTEMPT`
// (the agent's trainers; worker/agent/coordinator_store.h). Rank 0 writes the outputs
// into --out.
//
// `cohort-worker predict MODEL.keras --x X.npy [--key K] --out PRED.npy`: the model's
// outputs for every row of X, in inference mode.

#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/trainer/collective/store.h"

namespace cohort::trainer {

struct TrainCommand {
  std::string job_path;
  int rank = 0;
  int world = 1;
  std::string rendezvous;
  std::string out_dir;
  std::string device;  // empty: the job's resources.device
  bool resume = false;
  int threads = 0;
  std::string collective_timeout = "60s";
  std::string hostname = "127.0.0.1";
  bool trace = false;
  int profile_epoch = 0;  // 0: none
  bool autograd = false;
  bool replica_per_rank = false;
};

// Adds the `train` subcommand to `app`, filling `command` when parsed.
CLI::App* AddTrainCommand(CLI::App& app, TrainCommand& command);

// Opens the rendezvous store a --rendezvous URL names. INVALID_ARGUMENT (the message
// names the accepted forms) for a URL it does not understand; other errors when the
// store cannot be opened. Called at most once per run, from the calling thread.
using StoreOpener =
    std::function<absl::StatusOr<std::unique_ptr<collective::Store>>(absl::string_view url)>;

// The standalone opener: `file://DIR` only (a FileStore in DIR).
absl::StatusOr<std::unique_ptr<collective::Store>> OpenFileStore(absl::string_view url);

// Runs the parsed command: 0 when training finished, 1 on an error (printed as one
// line on stderr, and as an "error" event on stdout), 2 for bad arguments (an unknown
// --rendezvous form included). The store is opened with `open_store` when --world > 1.
int RunTrainCommand(const TrainCommand& command, const StoreOpener& open_store = OpenFileStore);

struct PredictCommand {
  std::string model_path;
  std::string x_path;
  std::string x_key;
  std::string out_path;
  int64_t batch_size = 256;
  std::string device = "cpu";
};

CLI::App* AddPredictCommand(CLI::App& app, PredictCommand& command);
// 0 when the predictions were written, 1 on an error (one line on stderr).
int RunPredictCommand(const PredictCommand& command);

}  // namespace cohort::trainer
