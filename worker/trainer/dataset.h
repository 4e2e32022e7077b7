#pragma once

// Dataset: a job's x and y arrays (memory-mapped .npy/.npz), checked against the model
// before training, and gathered into LibTorch batches by row index.
//
// Checks (each an INVALID_ARGUMENT naming the file and what does not fit): x rows
// shaped like the model's input, y shaped for the output and the loss, as many y rows
// as x rows, at least one row, integer labels within the output's classes. NaN and
// infinity are found as batches are gathered during the first epoch (CheckBatch), so
// each rank reads only its own rows; the message names the file and the row.

#include <memory>
#include <string>

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "common/job/job_spec.h"
#include "common/keras/compile_config.h"
#include "common/keras/model_ir.h"
#include "common/npy/npy_array.h"

namespace cohort::trainer {

struct ArrayPair {
  std::unique_ptr<npy::NpyArray> x;
  std::unique_ptr<npy::NpyArray> y;
};

class Dataset {
 public:
  // Opens and checks the training data (and validation data or split) of `spec`.
  static absl::StatusOr<std::unique_ptr<Dataset>> Open(const job::DataSpec& spec,
                                                       const keras::ModelIr& ir,
                                                       const keras::LossConfig& loss);

  int64_t train_rows() const { return train_rows_; }
  // Validation rows: the split's tail of the training arrays, or the validation arrays.
  int64_t validation_rows() const { return validation_rows_; }
  // The shape of one y row (what keras::ResolveMetric needs).
  const std::vector<int64_t>& y_row_shape() const { return y_row_shape_; }

  // Rows `rows` (indices into the training rows) as tensors on `device`. With
  // `threaded`, the rows are copied by the calling thread's OpenMP threads (cpu_kernels'
  // ParallelSlices), which only the rank's training thread may ask for: they are its
  // compute threads, idle while it gathers. One thread copying a 1024-row mlp batch
  // (3 MiB from scattered rows) left the other idle ~0.5 ms of a 5 ms step.
  absl::Status GatherTrain(std::span<const int64_t> rows, torch::Device device, bool check,
                           bool threaded, torch::Tensor* x, torch::Tensor* y) const;
  // Validation rows [begin, end), copied as GatherTrain's `threaded` (the training
  // thread asks for them).
  absl::Status GatherValidation(int64_t begin, int64_t end, torch::Device device,
                                torch::Tensor* x, torch::Tensor* y) const;

 private:
  Dataset() = default;
  absl::Status Gather(const ArrayPair& arrays, std::span<const int64_t> rows,
                      torch::Device device, bool check, bool threaded, torch::Tensor* x,
                      torch::Tensor* y) const;

  ArrayPair train_;
  ArrayPair validation_;  // empty when validating on a split of train_
  int64_t train_rows_ = 0;
  int64_t validation_rows_ = 0;
  npy::DType x_dtype_ = npy::DType::kFloat32;  // float32, or int64 for Embedding inputs
  npy::DType y_dtype_ = npy::DType::kFloat32;  // int64 for sparse labels
  std::vector<int64_t> x_row_shape_;
  std::vector<int64_t> y_row_shape_;
};

}  // namespace cohort::trainer
