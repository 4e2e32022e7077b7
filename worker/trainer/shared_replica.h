#pragma once

// SharedReplica: ranks that all run on one machine keep one copy of the model in shared
// memory (Collective::SharedFloats) instead of one replica each kept equal by
// all-reducing gradients: the parameters and the optimizer's slots are shared, each rank
// writes its gradients into a buffer of its own there, and each rank sums and updates
// its own 1/N of the parameters.
//
// A step, on every rank:
//   backward writes this rank's gradients into its buffer    (reads the parameters)
//   ReduceGradients: barrier; this rank's range of every rank's gradients summed into
//     its own buffer (its own first, then the others in rank order), checked finite;
//     barrier, so every rank knows whether all ranges (and all losses) were finite
//   Update: the optimizer over this rank's range; barrier (before anyone's next forward)
// Against an all-reduce of the whole gradient (copies into the segment, a sum, copies
// out: memory traffic of 3 gradients, on the same cores that compute) and an optimizer
// step over every parameter on every rank, this reads 1/N of every gradient once and
// runs 1/N of the optimizer. The parameters every rank ends with are the same bits by
// construction (there is one copy).
//
// Used only where every update reads only its own range (Optimizer::UpdatesByRange) and
// parameters live in host memory. The checkpoints and the model file read the shared
// copy, which is whole between steps.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/collective/collective.h"
#include "worker/trainer/flat_parameters.h"
#include "worker/trainer/optimizer.h"

namespace cohort::trainer {

class SharedReplica {
 public:
  // The shared floats a SharedReplica of these needs (GlooOptions::shared_floats).
  static size_t FloatsNeeded(int64_t parameters, int optimizer_slots, int ranks);

  // Null when `collective` has no shared memory (its ranks are not all on this
  // machine). Otherwise moves `flat`'s buffers and `optimizer`'s slots there, rank 0's
  // values being the ones kept, and waits for every rank to have done so. All three must
  // outlive the result; nothing may read the parameters after `collective` is gone.
  static absl::StatusOr<std::unique_ptr<SharedReplica>> Create(collective::Collective* collective,
                                                               FlatParameters* flat,
                                                               Optimizer* optimizer);

  // After backward: sums this rank's range of the gradients; whether every rank's range
  // and `loss_finite` were finite everywhere (every rank gets the same answer).
  absl::StatusOr<bool> ReduceGradients(bool loss_finite);
  // The optimizer's step over this rank's range, then a barrier.
  absl::Status Update();

  int64_t range_begin() const { return begin_; }
  int64_t range_end() const { return end_; }

 private:
  SharedReplica(collective::Collective* collective, FlatParameters* flat, Optimizer* optimizer);

  collective::Collective* const collective_;
  FlatParameters* const flat_;
  Optimizer* const optimizer_;
  const int rank_;
  const int size_;
  float* flags_ = nullptr;               // one cache line per rank
  std::vector<const float*> gradients_;  // every rank's gradient buffer
  int64_t begin_ = 0, end_ = 0;          // this rank's range
};

}  // namespace cohort::trainer
