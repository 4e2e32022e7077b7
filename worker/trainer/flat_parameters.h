#pragma once

// FlatParameters: the trainable variables of a model as views into one flat float32
// buffer, and their gradients as views into another (PyTorch DDP's
// gradient_as_bucket_view). Autograd accumulates each gradient in place into its view,
// so a bucket of the gradient buffer can be all-reduced without copying, and the
// optimizer updates every variable with a handful of vectorized operations.
//
// The variables are laid out in the order given, which the trainer chooses to be the
// order their gradients arrive in (the reverse of the forward order), each starting on
// a 64-byte line; the padding between them is zero in both buffers. Checkpoints keep
// the variables back to back (Packed, Unpacked), as before the padding.

#include <cstdint>
#include <span>
#include <vector>

#include <torch/torch.h>

namespace cohort::trainer {

// Floats in a 64-byte cache line. Every variable in the flat buffers starts on one: a
// matrix product reads a misaligned operand with loads split across two lines (the
// mlp's first layer at 40 bytes off: its forward product 10-17% slower in
// bench/kernel_floor); so do the shared model's ranges (shared_replica.h).
inline constexpr int64_t kLineFloats = 16;
// `floats` rounded up to whole lines.
inline int64_t LineRoundUp(int64_t floats) {
  return (floats + kLineFloats - 1) / kLineFloats * kLineFloats;
}

class FlatParameters {
 public:
  struct Slot {
    int64_t offset = 0;
    int64_t numel = 0;
  };

  // Re-points every tensor in `variables` (leaves with requires_grad) into the flat
  // buffers, keeping their values. The tensors must outlive this object.
  explicit FlatParameters(const std::vector<torch::Tensor*>& variables);

  // Moves the buffers into memory of the caller's (numel() floats each, outliving this
  // object; e.g. shared with other processes), re-pointing every variable and its
  // gradient there. The gradients keep their values; the parameters do only when
  // `copy_values` (otherwise they take what `data` holds).
  void MoveTo(float* data, float* grad, bool copy_values);

  torch::Tensor& data() { return data_; }
  torch::Tensor& grad() { return grad_; }
  const std::vector<Slot>& slots() const { return slots_; }
  int64_t numel() const { return data_.numel(); }  // the padding included
  // The variables' elements alone (what a checkpoint holds).
  int64_t packed_numel() const;
  // `flat` (numel() floats, laid out as data(): the parameters, a gradient, an
  // optimizer slot) without the padding: packed_numel() floats, the variables back to
  // back. Unpacked is the reverse, with zero padding.
  torch::Tensor Packed(const torch::Tensor& flat) const;
  torch::Tensor Unpacked(const torch::Tensor& packed) const;

  void ZeroGrad() { grad_.zero_(); }
  // True when no gradient is NaN or infinite.
  bool GradFinite() const;

 private:
  // Points the variables and their gradients into data_ and grad_.
  void PointVariables();

  std::vector<torch::Tensor*> variables_;
  torch::Tensor data_;
  torch::Tensor grad_;
  std::vector<Slot> slots_;
};

// Whether `t` is a contiguous float32 tensor on the CPU, and its elements as a span: what
// the loops of cpu_kernels.h take.
bool IsCpuFloat(const torch::Tensor& t);
std::span<float> FloatSpan(torch::Tensor& t);
std::span<const float> FloatSpan(const torch::Tensor& t);

}  // namespace cohort::trainer
