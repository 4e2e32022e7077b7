#pragma once

// The trainer's commands of cohort-worker, as CLI11 subcommands. Torch-free header.
//
// `cohort-worker train JOB.yaml --rank R --world N --rendezvous file://DIR --out DIR
// [--device cpu|cuda] [--resume]`: one rank of a job, without a coordinator. Ranks of
// one run share the rendezvous directory; rank 0 writes the outputs into --out.
//
// `cohort-worker predict MODEL.keras --x X.npy [--key K] --out PRED.npy`: the model's
// outputs for every row of X, in inference mode.

#include <string>

#include <CLI/CLI.hpp>

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
};

// Adds the `train` subcommand to `app`, filling `command` when parsed.
CLI::App* AddTrainCommand(CLI::App& app, TrainCommand& command);

// Runs the parsed command: 0 when training finished, 1 on an error (printed as one
// line on stderr, and as an "error" event on stdout), 2 for bad arguments.
int RunTrainCommand(const TrainCommand& command);

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
