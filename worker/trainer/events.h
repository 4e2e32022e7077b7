#pragma once

// Progress events of a training run as JSON lines, one object per line, flushed at
// once: what the agent forwards to the coordinator and what `bench/` reads. Every
// object has "event" and "time" (seconds since the Unix epoch); the kinds:
//   {"event":"start", "rank", "world", "epochs", "steps", "samples", "device"}
//   {"event":"step", "epoch", "epochs", "step", "steps", "metrics":{name: value},
//    "samples_per_second"}     (rank 0 only, at most every `step_interval`)
//   {"event":"epoch_end", "epoch", "epochs", "metrics":{...incl. val_*}, "seconds",
//    "samples_per_second"}     (rank 0 only; global metrics)
//   {"event":"checkpoint", "epoch", "path"}
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
