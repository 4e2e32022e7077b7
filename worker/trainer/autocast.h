#pragma once

// fit.precision mixed_bfloat16 for a forward pass through autograd: AutocastScope, and
// ForwardInPrecision, which the trainer calls.
// LibTorch's autocast runs the ops on its lists (matrix products, convolutions) in
// bfloat16 and keeps the rest, and the float32 weights, as they are; the weights'
// bfloat16 copies live until the outermost scope ends. Thread-local, as autocast is.

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "worker/trainer/keras_model.h"

namespace cohort::trainer {

class AutocastScope {
 public:
  explicit AutocastScope(const torch::Device& device) : cuda_(device.is_cuda()) {
    if (cuda_) {
      at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
      at::autocast::set_enabled(true);
    } else {
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(true);
    }
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    if (cuda_) {
      at::autocast::set_enabled(false);
    } else {
      at::autocast::set_cpu_enabled(false);
    }
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool cuda_;
};

// The model's forward pass, under autocast when `bfloat16`; the value and logits are
// float32 either way, so that the loss and metrics are computed in float32 (as Keras'
// mixed policies do).
inline KerasModel::Output ForwardInPrecision(KerasModel& model, const torch::Tensor& x,
                                             bool training, bool bfloat16) {
  if (!bfloat16) return model.Forward(x, training);
  KerasModel::Output out;
  {
    AutocastScope autocast(model.device());
    out = model.Forward(x, training);
  }
  out.value = out.value.to(torch::kFloat32);
  if (out.logits.defined()) out.logits = out.logits.to(torch::kFloat32);
  return out;
}

}  // namespace cohort::trainer
