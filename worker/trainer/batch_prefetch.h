#pragma once

// BatchPrefetcher: gathers the next step's batch of a rank on a thread of its own while
// the current step computes, so copying rows out of the memory-mapped arrays (and the
// first epoch's NaN check) leaves the step's critical path.
//
// Steps are taken in order; Take(step) returns the batch of `step` (gathered in the
// background when it was the one expected, else now) and starts gathering step + 1.
// A gather's error (a row holding NaN, an unreadable file) is returned by the Take of
// its own step, so errors surface at the same step as without prefetching. The rows are
// those of the BatchPlan; nothing here depends on random state.
//
// Threads: one training thread calls Take; the destructor waits for an outstanding
// gather. `data` and `plan` must outlive the prefetcher and `plan` must not change.

#include <cstdint>
#include <future>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "worker/trainer/batch_plan.h"
#include "worker/trainer/dataset.h"

namespace cohort::trainer {

class BatchPrefetcher {
 public:
  BatchPrefetcher(const Dataset& data, const BatchPlan& plan, torch::Device device, bool check)
      : data_(data), plan_(plan), device_(device), check_(check) {}
  ~BatchPrefetcher();

  absl::Status Take(int64_t step, torch::Tensor* x, torch::Tensor* y);

 private:
  struct Batch {
    absl::Status status;
    torch::Tensor x, y;
  };
  Batch Gather(int64_t step) const;

  const Dataset& data_;
  const BatchPlan& plan_;
  const torch::Device device_;
  const bool check_;
  std::future<Batch> next_;
  int64_t next_step_ = -1;
};

}  // namespace cohort::trainer
