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
// Only where the rank has a core to spare (`background`): else the gathering thread
// takes the core from the rank's own compute threads (OpenBLAS' threads wait for each
// other, so one descheduled thread stalls a whole product), and gathering in line was
// 5-10% faster (mlp, batch 128: 1 rank on 2 threads, or 2 ranks of 1 thread, on 2
// cores); with a spare core, gathering in the background was 6% faster (mlp, batch
// 1024, 1 rank on 1 thread). In line, the rows are copied by the rank's compute
// threads (Dataset::GatherTrain's `threaded`).
//
// Threads: one training thread calls Take; one gathering thread, started by the first
// Take and kept for the prefetcher's life (a thread per step cost a clone, a stack
// mapping and its release, every step). The destructor waits for an outstanding gather
// and ends the thread. `data` and `plan` must outlive the prefetcher and `plan` must
// not change.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "worker/trainer/batch_plan.h"
#include "worker/trainer/dataset.h"

namespace cohort::trainer {

class BatchPrefetcher {
 public:
  BatchPrefetcher(const Dataset& data, const BatchPlan& plan, torch::Device device, bool check,
                  bool background)
      : data_(data), plan_(plan), device_(device), check_(check), background_(background) {}
  ~BatchPrefetcher();

  absl::Status Take(int64_t step, torch::Tensor* x, torch::Tensor* y);

 private:
  struct Batch {
    absl::Status status;
    torch::Tensor x, y;
  };
  // On the training thread, `threaded` (the rank's compute threads copy the rows); on
  // the gathering thread, not (it has no threads of its own to spare).
  Batch Gather(int64_t step, bool threaded) const;
  void GatherLoop();
  // The batch of `step` from the gathering thread, if it was asked for that step; waits
  // for it. Any other outstanding gather is waited for and dropped.
  std::optional<Batch> TakeGathered(int64_t step);

  const Dataset& data_;
  const BatchPlan& plan_;
  const torch::Device device_;
  const bool check_;
  const bool background_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t asked_ = -1;        // guarded by mu_: the step asked for, until gathered
  bool gathering_ = false;    // guarded by mu_: the thread has a step in hand
  std::optional<Batch> done_;  // guarded by mu_: the gathered batch of done_step_
  int64_t done_step_ = -1;
  bool stop_ = false;  // guarded by mu_
};

}  // namespace cohort::trainer
