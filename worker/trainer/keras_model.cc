#include "worker/trainer/keras_model.h"

#include "absl/strings/str_cat.h"
#include "worker/trainer/initializers.h"
#include "worker/trainer/layer_ops.h"

namespace cohort::trainer {
namespace {

using keras::LayerClass;

// LibTorch's layout of a Keras variable: conv kernels (k..., in, out) become
// (out, in, k...); everything else is stored as Keras stores it.
std::vector<int64_t> KerasToTorchPermutation(LayerClass cls, const keras::WeightSpec& w) {
  if (w.name != "kernel") return {};
  if (cls == LayerClass::kConv2D) return {3, 2, 0, 1};
  if (cls == LayerClass::kConv1D) return {2, 1, 0};
  return {};
}

std::vector<int64_t> Inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

// Every variable gets its own seed, so adding a layer does not shift the others.
uint64_t VariableSeed(uint64_t seed, int node, int index) {
  uint64_t h = seed ^ 0x9e3779b97f4a7c15ULL;
  for (uint64_t v : {uint64_t(node), uint64_t(index)}) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  }
  return h;
}

}  // namespace

absl::StatusOr<std::unique_ptr<KerasModel>> KerasModel::Create(const keras::ModelIr& ir,
                                                               torch::Device device,
                                                               uint64_t seed) {
  std::unique_ptr<KerasModel> model(new KerasModel(ir, device));
  const int count = static_cast<int>(ir.nodes.size());
  std::vector<std::vector<int>> readers(count);
  for (int n = 0; n < count; ++n) {
    for (int in : ir.nodes[n].inputs) readers[in].push_back(n);
  }
  model->pooling_reader_.assign(count, -1);
  for (int n = 0; n + 1 < count; ++n) {
    const auto* conv = std::get_if<keras::Conv2DConfig>(&ir.nodes[n].config);
    if (conv != nullptr &&
        (conv->activation == keras::Activation::kRelu || conv->activation == keras::Activation::kLinear) &&
        readers[n].size() == 1 && ir.nodes[readers[n][0]].layer_class() == LayerClass::kMaxPooling2D) {
      model->pooling_reader_[n] = readers[n][0];
    }
  }
  try {
    model->node_variables_.resize(ir.nodes.size());
    for (int n = 0; n < static_cast<int>(ir.nodes.size()); ++n) {
      const keras::Node& node = ir.nodes[n];
      for (int i = 0; i < static_cast<int>(node.weights.size()); ++i) {
        const keras::WeightSpec& w = node.weights[i];
        torch::Tensor value = InitializeVariable(w.initializer, w.shape, VariableSeed(seed, n, i));
        std::vector<int64_t> perm = KerasToTorchPermutation(node.layer_class(), w);
        if (!perm.empty()) value = value.permute(perm);
        ModelVariable v;
        v.node = n;
        v.index = i;
        v.trainable = w.trainable;
        v.value = value.contiguous().to(device);
        if (v.trainable) v.value.set_requires_grad(true);
        model->node_variables_[n].push_back(static_cast<int>(model->variables_.size()));
        model->variables_.push_back(std::move(v));
      }
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot build the model in LibTorch: ", e.what()));
  }
  return model;
}

std::vector<torch::Tensor*> KerasModel::NodeVariables(int i) {
  std::vector<torch::Tensor*> out;
  for (int v : node_variables_[i]) out.push_back(&variables_[v].value);
  return out;
}

torch::Tensor KerasModel::KerasLayout(const ModelVariable& v) const {
  const keras::Node& node = ir_.nodes[v.node];
  std::vector<int64_t> perm = KerasToTorchPermutation(node.layer_class(), node.weights[v.index]);
  torch::Tensor value = v.value.detach().to(torch::kCPU);
  if (!perm.empty()) value = value.permute(Inverse(perm));
  return value.contiguous();
}

void KerasModel::FromKerasLayout(ModelVariable& v, const torch::Tensor& keras_value) {
  const keras::Node& node = ir_.nodes[v.node];
  std::vector<int64_t> perm = KerasToTorchPermutation(node.layer_class(), node.weights[v.index]);
  torch::Tensor value = perm.empty() ? keras_value : keras_value.permute(perm);
  torch::NoGradGuard no_grad;
  v.value.copy_(value);
}

absl::Status KerasModel::LoadWeights(const KerasWeights& weights) {
  for (ModelVariable& v : variables_) {
    const keras::Node& node = ir_.nodes[v.node];
    const keras::WeightSpec& spec = node.weights[v.index];
    absl::StatusOr<const KerasVariable*> found =
        weights.FindVariable(node.weights_group + "/vars", v.index, spec.shape);
    if (!found.ok()) return found.status();
    const KerasVariable& kv = **found;
    torch::Tensor value = torch::from_blob(const_cast<float*>(kv.values.data()), kv.shape,
                                           torch::kFloat32);
    FromKerasLayout(v, value);
  }
  return absl::OkStatus();
}

KerasWeights KerasModel::SaveWeights() const {
  KerasWeights out;
  KerasVarGroup model_group;
  model_group.path = "vars";
  model_group.name = ir_.name;
  out.groups.push_back(model_group);
  for (int n = 0; n < static_cast<int>(ir_.nodes.size()); ++n) {
    const keras::Node& node = ir_.nodes[n];
    if (node.weights_group.empty()) continue;
    KerasVarGroup group;
    group.path = node.weights_group + "/vars";
    group.name = node.name;
    for (int v : node_variables_[n]) {
      torch::Tensor value = KerasLayout(variables_[v]);
      KerasVariable kv;
      kv.shape.assign(value.sizes().begin(), value.sizes().end());
      kv.values.assign(value.data_ptr<float>(), value.data_ptr<float>() + value.numel());
      group.variables.push_back(std::move(kv));
    }
    out.groups.push_back(std::move(group));
  }
  return out;
}

KerasModel::Output KerasModel::Forward(const torch::Tensor& x, bool training) {
  const int count = static_cast<int>(ir_.nodes.size());
  std::vector<torch::Tensor> outs(count);
  Output result;
  for (int i = 0; i < count; ++i) {
    std::vector<torch::Tensor> inputs;
    for (int in : ir_.nodes[i].inputs) inputs.push_back(outs[in]);
    if (i == 0) inputs.push_back(x);
    bool last = i == count - 1;
    if (!last) {
      outs[i] = RunNode(i, inputs, training);
      continue;
    }
    // The last node: keep what comes before a final softmax/sigmoid as logits.
    const keras::Node& node = ir_.nodes[i];
    keras::Activation act = keras::Activation::kLinear;
    if (auto* d = std::get_if<keras::DenseConfig>(&node.config)) act = d->activation;
    if (auto* c = std::get_if<keras::Conv1DConfig>(&node.config)) act = c->activation;
    if (auto* c = std::get_if<keras::Conv2DConfig>(&node.config)) act = c->activation;
    if (auto* a = std::get_if<keras::ActivationConfig>(&node.config)) act = a->activation;
    bool fuse = act == keras::Activation::kSoftmax || act == keras::Activation::kSigmoid;
    if (auto* s = std::get_if<keras::SoftmaxConfig>(&node.config)) {
      fuse = s->axis == static_cast<int>(node.output_shape.size());  // the last axis
      act = keras::Activation::kSoftmax;
    }
    if (!fuse) {
      outs[i] = RunNode(i, inputs, training);
      break;
    }
    bool activation_layer = node.layer_class() == LayerClass::kActivation ||
                            node.layer_class() == LayerClass::kSoftmax;
    result.logits = activation_layer ? inputs[0] : RunNode(i, inputs, training, false);
    result.final_activation = act;
    outs[i] = ApplyActivation(result.logits, act);
  }
  result.value = outs[count - 1];
  return result;
}

torch::Tensor KerasModel::RunNode(int i, const std::vector<torch::Tensor>& in, bool training,
                                  bool with_activation) {
  const keras::Node& node = ir_.nodes[i];
  std::vector<torch::Tensor*> vars = NodeVariables(i);
  auto var = [&](size_t k) { return k < vars.size() ? *vars[k] : torch::Tensor(); };
  auto act = [&](const torch::Tensor& y, keras::Activation a) {
    return with_activation ? ApplyActivation(y, a) : y;
  };
  const torch::Tensor& x = in.empty() ? torch::Tensor() : in[0];
  const int64_t n = x.defined() ? x.size(0) : 0;
  switch (node.layer_class()) {
    case LayerClass::kInputLayer:
      return x;
    case LayerClass::kDense: {
      const auto& c = std::get<keras::DenseConfig>(node.config);
      return act(Dense(x, var(0), c.use_bias ? var(1) : torch::Tensor()), c.activation);
    }
    case LayerClass::kConv1D: {
      const auto& c = std::get<keras::Conv1DConfig>(node.config);
      return act(Conv1D(x, var(0), c.use_bias ? var(1) : torch::Tensor(), c), c.activation);
    }
    case LayerClass::kConv2D: {
      const auto& c = std::get<keras::Conv2DConfig>(node.config);
      torch::Tensor bias = c.use_bias ? var(1) : torch::Tensor();
      if (int pooling = pooling_reader_[i]; pooling >= 0) {
        return Conv2DMaxPool2D(x, var(0), bias, c,
                               std::get<keras::MaxPooling2DConfig>(ir_.nodes[pooling].config),
                               c.activation == keras::Activation::kRelu);
      }
      return act(Conv2D(x, var(0), bias, c), c.activation);
    }
    case LayerClass::kMaxPooling1D:
      return MaxPool1D(x, std::get<keras::MaxPooling1DConfig>(node.config));
    case LayerClass::kMaxPooling2D:
      // Pooled already by the Conv2D it reads (pooling_reader_).
      if (pooling_reader_[node.inputs[0]] == i) return x;
      return MaxPool2D(x, std::get<keras::MaxPooling2DConfig>(node.config));
    case LayerClass::kAveragePooling2D:
      return AvgPool2D(x, std::get<keras::AveragePooling2DConfig>(node.config));
    case LayerClass::kGlobalAveragePooling1D:
      return x.mean({1}, std::get<keras::GlobalAveragePooling1DConfig>(node.config).keepdims);
    case LayerClass::kGlobalAveragePooling2D:
      return x.mean({1, 2}, std::get<keras::GlobalAveragePooling2DConfig>(node.config).keepdims);
    case LayerClass::kGlobalMaxPooling2D:
      return x.amax({1, 2}, std::get<keras::GlobalMaxPooling2DConfig>(node.config).keepdims);
    case LayerClass::kFlatten:
      return x.reshape({n, -1});
    case LayerClass::kReshape: {
      std::vector<int64_t> shape{n};
      for (int64_t d : std::get<keras::ReshapeConfig>(node.config).target_shape) shape.push_back(d);
      return x.reshape(shape);
    }
    case LayerClass::kDropout:
      return training ? Dropout(x, std::get<keras::DropoutConfig>(node.config)) : x;
    case LayerClass::kBatchNormalization: {
      const auto& c = std::get<keras::BatchNormalizationConfig>(node.config);
      // Variables in Keras' order, each only when enabled: gamma, beta, mean, variance.
      size_t k = 0;
      torch::Tensor gamma = c.scale ? var(k++) : torch::Tensor();
      torch::Tensor beta = c.center ? var(k++) : torch::Tensor();
      return BatchNorm(x, gamma, beta, *vars[k], *vars[k + 1], c, training && node.trainable);
    }
    case LayerClass::kLayerNormalization: {
      const auto& c = std::get<keras::LayerNormalizationConfig>(node.config);
      size_t k = 0;
      torch::Tensor gamma = c.scale ? var(k++) : torch::Tensor();
      torch::Tensor beta = c.center ? var(k++) : torch::Tensor();
      return LayerNorm(x, gamma, beta, c);
    }
    case LayerClass::kActivation:
      return act(x, std::get<keras::ActivationConfig>(node.config).activation);
    case LayerClass::kReLU:
      return KerasReLU(x, std::get<keras::ReLUConfig>(node.config));
    case LayerClass::kSoftmax:
      return with_activation ? torch::softmax(x, std::get<keras::SoftmaxConfig>(node.config).axis) : x;
    case LayerClass::kEmbedding:
      return torch::embedding(var(0), x.to(torch::kLong));
    case LayerClass::kAdd: {
      torch::Tensor sum = in[0];
      for (size_t k = 1; k < in.size(); ++k) sum = sum + in[k];
      return sum;
    }
    case LayerClass::kConcatenate:
      return torch::cat(in, std::get<keras::ConcatenateConfig>(node.config).axis);
  }
  return x;
}

}  // namespace cohort::trainer
