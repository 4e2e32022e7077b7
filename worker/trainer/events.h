#pragma once

// Progress events of a training run as JSON lines, one object per line, flushed at
// once: what the agent forwards to the coordinator and what `bench/` reads. Every
// object has "event" and "time" (seconds since the Unix epoch); the kinds:
//   {"event":"start", "rank", "world", "epochs", "first_epoch", "steps", "samples", "device",
//    "training_step", "precision", "all_reduce", "shared_model" (ranks on one machine
//    sharing one copy of the model: worker/trainer/shared_replica.h), "openblas_core"}
//   {"event":"step", "epoch", "epochs", "step", "steps", "metrics":{name: value},
//    "samples_per_second"}     (rank 0 only, at most every `step_interval`)
//   {"event":"epoch_end", "epoch", "epochs", "metrics":{...incl. val_*}, "seconds",
//    "samples_per_second"}     (rank 0 only; global metrics)
//   {"event":"rank_stats", "rank", "epoch", "step", "steps" (in this window), "rows",
//    "samples_per_second" (this rank's rows), "step_seconds", "data_seconds",
//    "all_reduce_seconds", "all_reduce_wait_seconds" (per-step means of the window),
//    "all_reduce_bytes", "rss_bytes", "gpu_memory_bytes" (CUDA only)}   (every rank, at most every `step_interval` and
//    at each epoch's end; worker/trainer/step_stats.h)
//   {"event":"checkpoint", "epoch", "path" (the directory), "file" (the file written)}
//   {"event":"done", "model", "history"}
//   {"event":"error", "message"}
// Epochs and steps are 1-based, as Keras prints them. Torch-free; not thread-safe.

#include <cstdio>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/time/time.h"

namespace cohort::trainer {

class EventWriter {
 public:
  // `out` may be null (no events). Not owned.
  explicit EventWriter(std::FILE* out) : out_(out) {}
  void Emit(const std::string& kind, nlohmann::json fields);

 private:
  std::FILE* out_;
};

}  // namespace cohort::trainer
