#pragma once

// Keras' losses and metrics, per element, on a batch. The trainer sums them and divides
// by the GLOBAL number of elements (Keras' sum_over_batch_size over the global batch),
// so summing gradients across ranks gives exactly the gradient of the global mean.
//
// Cross-entropies on a softmax/sigmoid output are computed from the logits
// (log-softmax, BCE-with-logits) when the model provides them, as a stable form of
// what Keras computes; otherwise as Keras does on probabilities (clipped to
// [1e-7, 1 - 1e-7]).

#include <torch/torch.h>

#include "common/keras/compile_config.h"
#include "worker/trainer/keras_model.h"

namespace cohort::trainer {

// Per-sample losses with the batch first: shape (N,) for (N, C) outputs, (N, T) for
// (N, T, C) outputs; their mean is Keras' loss value.
torch::Tensor ElementLosses(const keras::LossConfig& loss, const KerasModel::Output& out,
                            const torch::Tensor& y);

// Per-element metric values whose mean is the metric: e.g. 1/0 for accuracies.
torch::Tensor MetricValues(const keras::MetricConfig& metric, const torch::Tensor& prediction,
                           const torch::Tensor& y);

// The sum of MetricValues and how many there are. The accuracies of a float32 CPU batch
// against int64 labels or float32 one-hot targets are counted in one loop
// (cpu_kernels.h): their LibTorch ops took ~40 us of a 1.2 ms mlp step.
struct MetricTotal {
  double sum = 0;
  int64_t count = 0;
};
MetricTotal MetricSum(const keras::MetricConfig& metric, const torch::Tensor& prediction,
                      const torch::Tensor& y);

}  // namespace cohort::trainer
