#pragma once

// BatchPlan: which rows each rank trains on, step by step (DESIGN.md, "Global batch
// semantics").
//
// Every epoch uses one permutation of the training rows, a pure function of (seed,
// epoch) computed identically on every rank and every world size (our own generator,
// not LibTorch's). The permuted rows are cut into global batches of `global_batch`
// rows (the last one smaller when the rows do not divide); rank r takes the r-th of
// `world` contiguous slices of each global batch, floor(r*n/world) to
// floor((r+1)*n/world) for a batch of n rows. So on 1 rank and on N ranks the same rows
// form each step's global batch, and since every rank divides its loss by the global
// batch size, the summed gradient is the same. Torch-free; thread-compatible.

#include <cstdint>
#include <span>
#include <vector>

namespace cohort::trainer {

class BatchPlan {
 public:
  BatchPlan(int64_t rows, int64_t global_batch, int rank, int world, bool shuffle, uint64_t seed);

  int64_t steps() const { return (rows_ + global_batch_ - 1) / global_batch_; }
  // Computes the permutation of `epoch` (0-based).
  void StartEpoch(int epoch);

  struct Slice {
    std::span<const int64_t> rows;  // this rank's rows of the step, indices into the data
    int64_t global_rows = 0;        // rows of the whole global batch
  };
  // Step `step` (0-based) of the current epoch.
  Slice RankSlice(int64_t step) const;

 private:
  int64_t rows_, global_batch_;
  int rank_, world_;
  bool shuffle_;
  uint64_t seed_;
  std::vector<int64_t> order_;
};

// The rows [begin, end) of `rows` that rank `rank` of `world` evaluates: contiguous
// near-equal shares (validation needs no shuffling).
std::pair<int64_t, int64_t> RankShare(int64_t rows, int rank, int world);

}  // namespace cohort::trainer
