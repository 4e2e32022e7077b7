#pragma once

// DenseGraph: the training step of a model made only of Dense layers and what sits
// between them element by element (Add, ReLU, Activation, Flatten and Dropout(0) of
// vectors), written out by hand instead of recorded by autograd:
//   - forward: each Dense is one GEMM (gemm.h: oneDNN's, faster here than the OpenBLAS
//     behind LibTorch's own products) into a buffer kept from step to step, onto the
//     bias, the activation applied in place;
//   - loss: the loss and its gradient with respect to the logits in one pass
//     (cpu_kernels.h): softmax cross-entropy (sparse, or categorical with label
//     smoothing) on a softmax output or from logits, and mean squared error on a linear
//     output;
//   - backward: the activation's derivative in place, then each kernel's and bias'
//     gradient computed straight into its view of the flat gradient buffer, and the
//     input's gradient accumulated into the producer's buffer.
// No graph is recorded and, once the buffers have grown to the batch, nothing is
// allocated. The mlp's 128-row step on one thread: 1.67 ms through autograd (with
// OpenBLAS' products), 1.17 ms here (docs/benchmarks.md). Every other model trains
// through autograd.
//
// Results equal autograd's up to float rounding (tests/worker/trainer/dense_graph_test.cc,
// and trainer_keras_test's comparisons with Keras' own fit, which run through here).
// CPU and float32 only; the products run on the threads gemm.h says. Not thread-safe:
// one thread trains one model.

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
                                            std::string* why_not);

  ~DenseGraph();

  struct Forward {
    torch::Tensor prediction;  // (N, C): the model's output; valid until the next Forward
    double loss_sum = 0;       // the rows' losses, summed
  };
  // The forward pass and the loss of a batch (x: (N, features) float32, y: as the
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
  void AddGradient(int node, const torch::Tensor& gradient);  // into grads_[node]

  std::vector<Op> ops_;  // the model's nodes, in order
  int logits_node_ = 0;  // the node whose output the loss reads
  bool softmax_ = false;  // the output is the softmax of the logits
  keras::LossConfig loss_;
  std::vector<torch::Tensor> outputs_, grads_;  // per node, kept between steps
  std::vector<bool> grad_set_;                  // per node, this step
  torch::Tensor probabilities_, labels_, targets_;
};

}  // namespace cohort::trainer
