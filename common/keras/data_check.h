#pragma once

// Checks a model against the arrays it will be trained on, before any training, so a
// job whose data cannot fit its model is refused at submit. The caller reads the
// arrays' headers (shape, dtype) and, where a value range matters, their values.
//
// Pure functions: any thread may call them. Errors are InvalidArgument with messages
// safe to show users, e.g. "layer 'dense_2' expects 64 features, data has 63".

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/keras/compile_config.h"
#include "common/keras/model_ir.h"
#include "common/keras/shape_inference.h"

namespace cohort::keras {

// An array as its header describes it.
struct ArraySpec {
  std::vector<int64_t> shape;  // the full shape, rows (samples) first
  DType dtype = DType::kFloat32;
};

// Checks that x and y fit `model` trained with `loss`:
//   - x and y have the same number of rows, at least one;
//   - each row of x has the model input's shape (its unknown dimensions take any size;
//     the model's shapes are then inferred again with the data's sizes, limits
//     included), and x's dtype converts to the input's: float data for an integer
//     input (token ids) is refused;
//   - y's rows have the shape `loss` needs given the output's shape: one class label
//     per output row for sparse_categorical_crossentropy, the output's shape for
//     categorical_crossentropy, the output's shape up to a trailing 1 for the others.
absl::Status CheckData(const ModelIr& model, const ArraySpec& x, const ArraySpec& y, LossKind loss,
                       const ModelLimits& limits = {});

// For sparse_categorical_crossentropy: the smallest and largest label in y must index
// the output's classes, e.g. "labels go up to 12 but the output has 10 classes".
absl::Status CheckLabelRange(const ModelIr& model, int64_t min_label, int64_t max_label);

// For a model whose input feeds an Embedding: the smallest and largest value in x must
// be token ids below its input_dim. OK when no Embedding reads the input.
absl::Status CheckTokenRange(const ModelIr& model, int64_t min_token, int64_t max_token);

// The activations one training step keeps for backward on one rank: the per-sample
// outputs of every layer (shapes inferred with x's row shape `x_rows`), summed, times
// `rank_batch` samples. RESOURCE_EXHAUSTED past `max_elements`, naming the largest
// layer: "a step of 256 samples per rank keeps 4294967296 activation elements, more
// than the limit of 1073741824 (the largest, layer 'c1' (Conv2D), outputs (512, 512, 64)
// per sample)". So a job that could only end OOM-killed on a worker is refused before.
absl::Status CheckStepActivations(const ModelIr& model, const Shape& x_rows, int64_t rank_batch,
                                  int64_t max_elements, const ModelLimits& limits = {});

}  // namespace cohort::keras
