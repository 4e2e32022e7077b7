#pragma once

// AutocastScope: fit.precision mixed_bfloat16 for one forward pass through autograd.
// LibTorch's autocast runs the ops on its lists (matrix products, convolutions) in
// bfloat16 and keeps the rest, and the float32 weights, as they are; the weights'
// bfloat16 copies live until the outermost scope ends. Thread-local, as autocast is.

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace cohort::trainer {

class AutocastScope {
 public:
  AutocastScope(bool enabled, const torch::Device& device)
      : enabled_(enabled), cuda_(device.is_cuda()) {
    if (!enabled_) return;
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
    if (!enabled_) return;
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
  bool enabled_, cuda_;
};

}  // namespace cohort::trainer
