#pragma once

// DenseGraph: the training step of a model made only of Dense layers and what sits
// between them element by element (Add, ReLU, Activation, Flatten and Dropout(0) of
// vectors, and a Flatten of the input, whatever its shape), written out by hand
// instead of recorded by autograd:
//   - forward: each Dense is one GEMM (gemm.h: oneDNN's, faster here than the OpenBLAS
//     behind LibTorch's own products) into a buffer kept from step to step, onto the
//     bias, the activation applied in place; an activation layer after a linear Dense
//     or an Add that nothing else reads is applied by that node (a residual block's
//     Add and ReLU: one pass, cpu_kernels.h's AddRelu);
//   - loss: the loss and its gradient with respect to the logits in one pass
//     (cpu_kernels.h): softmax cross-entropy (sparse, or categorical with label
//     smoothing) on a softmax output or from logits, and mean squared error on a linear
//     output;
//   - backward: the activation's derivative in place, then each kernel's and bias'
//     gradient computed straight into its view of the flat gradient buffer, and the
//     input's gradient accumulated into the producer's buffer (handed over without a
//     copy where the producer has none yet and the buffer is read no more).
// No graph is recorded and, once the buffers have grown to the batch, nothing is
// allocated. The mlp's 128-row step on one thread: 1.67 ms through autograd (with
// OpenBLAS' products), 1.17 ms here (docs/benchmarks.md). Every other model trains
// through autograd.
//
// Results equal autograd's up to float rounding (tests/worker/trainer/dense_graph_test.cc,
// and trainer_keras_test's comparisons with Keras' own fit, which run through here).
// CPU only; the products run on the threads gemm.h says. Not thread-safe: one thread
// trains one model.
//
// In bfloat16 (fit.precision mixed_bfloat16) every product takes its operands rounded
// to bfloat16 (the layer's input and kernel forward; the output's gradient, the input
// and the kernel backward) and sums into float32 (gemm.h's Bf16Gemm); everything else,
// the weights and gradients included, stays float32. Autograd under LibTorch's autocast
// also rounds each product's output to bfloat16; here only the operands are.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/keras/compile_config.h"
#include "worker/trainer/keras_model.h"

namespace cohort::trainer {

class DenseGraph {
 public:
  // Null, with the reason in `why_not`, when the model, the loss or the device is not
  // one DenseGraph covers. `flat_order`: the trainable variables in the order of the
  // flat buffers (FlatParameters), whose .grad() views the gradients are written to.
  static std::unique_ptr<DenseGraph> Create(KerasModel& model, const keras::LossConfig& loss,
                                            const std::vector<torch::Tensor*>& flat_order,
                                            bool bfloat16, std::string* why_not);

  ~DenseGraph();

  struct Forward {
    torch::Tensor prediction;  // (N, C): the model's output; valid until the next Forward
    double loss_sum = 0;       // the rows' losses, summed
  };
  // The forward pass and the loss of a batch (x: (N, ...) float32, y: as the
  // dataset gives it); `scale` multiplies the gradient of the loss sum (the trainer's
  // loss weight over the global batch).
  Forward RunForward(const torch::Tensor& x, const torch::Tensor& y, double scale);
  // The backward pass of the last RunForward: every trainable variable's gradient
  // overwrites its .grad(); `ready(i)` is called with the variable's index in
  // `flat_order` as soon as its gradient is written.
  void RunBackward(const std::function<void(int)>& ready);

  struct Op;  // one node of the model (dense_graph.cc)

 private:
  DenseGraph() = default;
  // grads_[node] += gradient, or = gradient when it has none yet this step: then with
  // `take` by swapping the two buffers (`gradient` is a node's own, read no more).
  void AddGradient(int node, torch::Tensor& gradient, bool take);
  // C = op(A) op(B) + beta C over the float32 operands, or over their bfloat16 copies
  // (given too) in bfloat16.
  struct Operand {
    const float* f32;
    const uint16_t* bf16;
  };
  void Product(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, Operand a,
               int64_t lda, Operand b, int64_t ldb, float beta, float* c, int64_t ldc) const;
  // `values` rounded to bfloat16 into `buffer` (grown as needed); null in float32.
  const uint16_t* Rounded(const torch::Tensor& values, std::vector<uint16_t>& buffer) const;

  std::vector<Op> ops_;  // the model's nodes, in order
  int logits_node_ = 0;  // the node whose output the loss reads
  bool softmax_ = false;  // the output is the softmax of the logits
  keras::LossConfig loss_;
  std::vector<torch::Tensor> outputs_, grads_;  // per node, kept between steps
  std::vector<bool> grad_set_;                  // per node, this step
  torch::Tensor probabilities_, labels_, targets_;
  bool bfloat16_ = false;
  // In bfloat16, per node: the Dense layer's input and kernel, rounded; and the output
  // gradient being propagated.
  std::vector<std::vector<uint16_t>> inputs_bf16_, kernels_bf16_;
  std::vector<uint16_t> grad_bf16_;
};

}  // namespace cohort::trainer
