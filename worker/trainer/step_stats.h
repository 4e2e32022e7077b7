#pragma once

// StepStats: where one rank's training steps spend their time, summed over a window of
// steps and handed out as the "rank_stats" event (worker/trainer/events.h) that the
// agent turns into Prometheus metrics. Every rank keeps its own; the trainer emits a
// window at most every step_event_interval and at the end of each epoch.
//
// Torch-free. Training thread only.

#include <cstdint>

#include <nlohmann/json.hpp>

#include "absl/time/time.h"

namespace cohort::trainer {

// One step of one rank.
struct StepTiming {
  absl::Duration step;            // the whole step, data to optimizer
  absl::Duration data;            // gathering this rank's rows of the batch
  absl::Duration all_reduce;      // first bucket started to last bucket done
  absl::Duration all_reduce_wait; // what the step waited for the all-reduce after backward
  int64_t all_reduce_bytes = 0;
  int64_t rows = 0;               // this rank's rows of the batch
};

class StepStats {
 public:
  void Add(const StepTiming& t);
  bool empty() const { return steps_ == 0; }

  // The fields of a "rank_stats" event for the steps added since the last call
  // (per-step means in seconds, sums for rows and bytes; samples_per_second is this
  // rank's rows over `elapsed`), and starts a new window.
  nlohmann::json TakeWindow(absl::Duration elapsed);

 private:
  int64_t steps_ = 0;
  StepTiming sum_;
};

// This process's resident memory in bytes (/proc/self/statm), or 0 where unknown.
int64_t ResidentBytes();

// Memory in use on CUDA device `device` (cudaMemGetInfo: every process's, so this
// rank's when it has the GPU to itself), or 0 where unknown or built without the CUDA
// runtime.
int64_t GpuMemoryUsedBytes(int device);

}  // namespace cohort::trainer
