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

  // Which parameters a Step updates: the flat range [begin, end) (end -1: to the end),
  // which needs only that range's gradients unless UpdatesByRange() is false (then it
  // must be everything). `shared`: other processes read these parameters (shared
  // memory).
  struct Part {
    int64_t begin = 0;
    int64_t end = -1;
    bool shared = false;
  };
  // One update from the gradients in `params`: of every parameter, or of `part`.
  void Step(FlatParameters& params);
  void Step(FlatParameters& params, Part part);
  // False when an update reads every gradient (clipping by norm).
  bool UpdatesByRange() const { return !config_.clipnorm && !config_.global_clipnorm; }

  int64_t iterations() const { return iterations_; }
  const keras::OptimizerConfig& config() const { return config_; }
  // The rate the next Step will use.
  double learning_rate() const { return config_.learning_rate.At(iterations_); }

  // State for checkpoints: the slot buffers (flat, like the parameters) in a fixed order.
  std::vector<torch::Tensor> State() const;
  absl::Status Restore(int64_t iterations, const std::vector<torch::Tensor>& state);
  // Moves the slots into `memory` (State().size() x the parameter count floats, owned by
  // the caller, outliving this object), copying their values there when `copy_values`.
  void MoveStateTo(float* memory, bool copy_values);

 private:
  void ClipGradients(FlatParameters& params, torch::Tensor& g);

  keras::OptimizerConfig config_;
  int64_t iterations_ = 0;
  // Kind-specific slots: Adam m, v (, v_hat); SGD momentum; RMSprop velocity
  // (, momentum)(, average gradient); Adagrad accumulator.
  std::vector<torch::Tensor> slots_;
};

}  // namespace cohort::trainer
