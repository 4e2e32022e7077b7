#pragma once

// Keras' optimizers (SGD with momentum/nesterov, Adam, AdamW, RMSprop, Adagrad) with
// Keras' update rules, applied to a FlatParameters buffer in a few vectorized ops.
// Where Keras and torch.optim differ, Keras wins: Adam's epsilon is added to sqrt(v)
// without bias correction of v (alpha = lr * sqrt(1 - b2^t) / (1 - b1^t), computed in
// float32 as Keras computes it); RMSprop and Adagrad add epsilon inside the square root;
// SGD momentum accumulates -lr * g; weight decay is decoupled (var -= var * wd * lr) and
// comes after gradient clipping.
//
// The learning rate follows the configured schedule, evaluated at iterations().

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "common/keras/compile_config.h"
#include "worker/trainer/flat_parameters.h"

namespace cohort::trainer {

class Optimizer {
 public:
  Optimizer(keras::OptimizerConfig config, const FlatParameters& params);

  // One update from the gradients in `params`.
  void Step(FlatParameters& params);

  int64_t iterations() const { return iterations_; }
  const keras::OptimizerConfig& config() const { return config_; }
  // The rate the next Step will use.
  double learning_rate() const { return config_.learning_rate.At(iterations_); }

  // State for checkpoints: the slot buffers (flat, like the parameters) in a fixed order.
  std::vector<torch::Tensor> State() const;
  absl::Status Restore(int64_t iterations, const std::vector<torch::Tensor>& state);

 private:
  void ClipGradients(FlatParameters& params);

  keras::OptimizerConfig config_;
  int64_t iterations_ = 0;
  // Kind-specific slots: Adam m, v (, v_hat); SGD momentum; RMSprop velocity
  // (, momentum)(, average gradient); Adagrad accumulator.
  std::vector<torch::Tensor> slots_;
};

}  // namespace cohort::trainer
