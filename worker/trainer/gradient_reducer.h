#pragma once

// GradientReducer: sums gradients across ranks while backward is still running.
//
// The flat gradient buffer (FlatParameters) is cut into buckets at variable
// boundaries: a small first bucket (gradients arrive first for the last layers, and a
// small bucket starts communication early), then buckets of about `bucket_bytes`.
// A post-hook on each variable's gradient accumulator counts arrivals; when every
// variable of a bucket has its gradient, the bucket's all-reduce is started on the
// collective's communication thread. Buckets are always started in index order (a
// complete bucket waits for the ones before it), so every rank issues the same
// operations in the same order whatever order its hooks fire in.
//
// FinishStep() starts what is left (buckets whose variables got no gradient, or all of
// them on a rank that had no samples this step) and waits for every bucket. With one
// rank (no collective) nothing is communicated.
//
// last_step() says what the step just finished cost in communication: for the
// trainer's TensorBoard curves and the agent's metrics.
//
// Threads: hooks may fire on autograd's threads; BeginStep and FinishStep are called by
// the training thread, outside backward; GradientReady by either.

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/trainer/collective/collective.h"
#include "worker/trainer/flat_parameters.h"

namespace cohort::trainer {

class GradientReducer {
 public:
  struct Options {
    int64_t first_bucket_bytes = 1 << 20;
    int64_t bucket_bytes = 25 << 20;
  };

  // `variables` in the flat order of `flat`. All must outlive the reducer.
  GradientReducer(FlatParameters* flat, const std::vector<torch::Tensor*>& variables,
                  collective::Collective* collective, Options options);
  ~GradientReducer();

  void BeginStep();
  // For a step computed without autograd (DenseGraph): variable `variable` (in the
  // flat order) has its gradient for this step. Autograd's steps call it from the hooks.
  void GradientReady(int variable);
  absl::Status FinishStep();

  int bucket_count() const { return static_cast<int>(buckets_.size()); }

  struct StepStats {
    // From the start of the step's first bucket all-reduce to the end of its last.
    absl::Duration all_reduce;
    // The part of it FinishStep waited for: what backward did not hide.
    absl::Duration wait;
    int64_t bytes = 0;  // all-reduced by this rank
    // Each bucket's all-reduce, in order: from its start until FinishStep saw it
    // complete, and not before the previous one ended (they run in order).
    std::vector<std::pair<absl::Time, absl::Time>> buckets;
  };
  // The step that FinishStep last finished; zeros with one rank. Training thread only.
  const StepStats& last_step() const { return last_step_; }

 private:
  struct Bucket {
    int64_t offset = 0;
    int64_t numel = 0;
    int variables = 0;
    int ready = 0;
  };
  void StartReadyBuckets();  // requires mu_

  FlatParameters* const flat_;
  collective::Collective* const collective_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // variable -> bucket
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // kept alive for the hooks

  std::mutex mu_;
  int next_to_start_ = 0;
  std::vector<std::unique_ptr<collective::Work>> works_;
  std::vector<absl::Time> starts_;  // of works_, guarded by mu_
  absl::Time first_start_;  // of this step's first bucket; guarded by mu_
  StepStats last_step_;
};

}  // namespace cohort::trainer
