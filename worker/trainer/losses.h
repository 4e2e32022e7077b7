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

}  // namespace cohort::trainer
