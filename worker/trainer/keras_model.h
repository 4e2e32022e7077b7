#pragma once

// KerasModel: a Keras model (keras::ModelIr) as LibTorch computations with Keras
// semantics: channels_last tensors throughout (a Conv2D input is (N, H, W, C)), Keras'
// padding rules (TF "same": the extra row/column goes after), Keras' initializers,
// BatchNormalization with Keras' momentum convention and biased moving variance.
//
// Variables live in LibTorch's layout (Conv kernels (out, in/groups, k...); Dense
// kernels stay (in, units) and are used as x @ kernel); KerasLayout()/FromKerasLayout()
// convert to and from the layout of model.weights.h5. Trainable variables are leaf
// tensors with requires_grad; the trainer may re-point their storage (set_data) into a
// flat buffer. Non-trainable ones (moving statistics, layers with trainable=false) are
// updated in place by Forward in training mode.
//
// Not thread-safe: one thread trains one model.

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "common/keras/model_ir.h"
#include "worker/trainer/weights/keras_weights.h"

namespace cohort::trainer {

struct ModelVariable {
  int node = 0;   // index into ModelIr::nodes
  int index = 0;  // index into Node::weights
  torch::Tensor value;
  bool trainable = true;
};

class KerasModel {
 public:
  // Builds the model on `device` with every variable drawn from its Keras initializer;
  // `seed` makes the draw the same on every rank.
  static absl::StatusOr<std::unique_ptr<KerasModel>> Create(const keras::ModelIr& ir,
                                                            torch::Device device, uint64_t seed);

  struct Output {
    torch::Tensor value;   // the model's output, as Keras computes it
    // The output before a final softmax/sigmoid (defined only then), so that
    // cross-entropies can be computed stably from logits.
    torch::Tensor logits;
    keras::Activation final_activation = keras::Activation::kLinear;
  };
  // `x`: a batch of inputs (N, ...) on the model's device, float32 (int64 for models
  // whose input feeds an Embedding). `training` enables dropout and batch statistics.
  Output Forward(const torch::Tensor& x, bool training);

  const keras::ModelIr& ir() const { return ir_; }
  torch::Device device() const { return device_; }
  std::vector<ModelVariable>& variables() { return variables_; }
  const std::vector<ModelVariable>& variables() const { return variables_; }

  // A variable's value in the layout of model.weights.h5, on the CPU.
  torch::Tensor KerasLayout(const ModelVariable& v) const;
  // Sets `v` from a value in the layout of model.weights.h5 (copied, on any device).
  void FromKerasLayout(ModelVariable& v, const torch::Tensor& keras_value);

  // Loads every variable from a weights file; errors name the dataset and the shapes.
  absl::Status LoadWeights(const KerasWeights& weights);
  // Every layer's vars group (and the model's), as Keras writes them.
  KerasWeights SaveWeights() const;

 private:
  KerasModel(keras::ModelIr ir, torch::Device device) : ir_(std::move(ir)), device_(device) {}
  // `with_activation` false leaves out the node's activation (the logits of the last).
  torch::Tensor RunNode(int i, const std::vector<torch::Tensor>& inputs, bool training,
                        bool with_activation = true);
  // The variables of node `i`, in Node::weights order.
  std::vector<torch::Tensor*> NodeVariables(int i);

  keras::ModelIr ir_;
  torch::Device device_;
  // Per node: for a Conv2D with activation "relu" or none whose output only a
  // MaxPooling2D reads, that node; else -1. The Conv2D runs the pooling too
  // (Conv2DMaxPool2D: its rectifier inside the pooling, so the rectified activations,
  // the cnn's 11 MB at 128 rows, are never written out, and with the loops for few
  // input channels not the convolution's output either), and the pooling node passes
  // its input on.
  std::vector<int> pooling_reader_;
  std::vector<ModelVariable> variables_;
  std::vector<std::vector<int>> node_variables_;  // node -> indices into variables_
};

}  // namespace cohort::trainer
