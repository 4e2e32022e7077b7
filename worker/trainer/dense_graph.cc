#include "worker/trainer/dense_graph.h"

#include "absl/strings/str_cat.h"
#include "worker/trainer/cpu_kernels.h"
#include "worker/trainer/gemm.h"

namespace cohort::trainer {

using keras::Activation;
using keras::LayerClass;
using keras::LossKind;

struct DenseGraph::Op {
  enum class Kind { kInput, kAlias, kDense, kActivation, kAdd };
  Kind kind = Kind::kAlias;
  std::vector<int> inputs;  // nodes whose buffers hold the inputs (aliases resolved)
  // Dense and Add: applied in place to the output (linear on the logits node, whose
  // softmax is the loss'); Activation: the function.
  Activation activation = Activation::kLinear;
  torch::Tensor* kernel = nullptr;
  torch::Tensor* bias = nullptr;
  int kernel_flat = -1, bias_flat = -1;  // index in the flat order; -1: not trainable
  bool needs_grad = false;  // a trainable variable is here or upstream
};

namespace {

using Kind = DenseGraph::Op::Kind;

bool Elementwise(Activation a) {
  return a == Activation::kLinear || a == Activation::kRelu || a == Activation::kTanh ||
         a == Activation::kSigmoid;
}

// `t` shaped (rows, columns), keeping its storage when it is large enough (resize_
// says nothing, where an out= op resizing a non-empty tensor warns).
torch::Tensor& Shaped(torch::Tensor& t, int64_t rows, int64_t columns) {
  if (t.dim() != 2 || t.size(0) != rows || t.size(1) != columns) t.resize_({rows, columns});
  return t;
}

float* Data(torch::Tensor& t) { return t.data_ptr<float>(); }
const float* Data(const torch::Tensor& t) { return t.data_ptr<float>(); }

// The rectifier and the bias go through cpu_kernels' loops: a LibTorch op per layer
// cost more in dispatch than these small blocks take to compute.
void ActivateInPlace(torch::Tensor& t, Activation a) {
  switch (a) {
    case Activation::kRelu: AddBiasRelu(Data(t), nullptr, t.size(0), t.size(1), true); break;
    case Activation::kTanh: t.tanh_(); break;
    case Activation::kSigmoid: t.sigmoid_(); break;
    default: break;
  }
}

// g *= the activation's derivative, from the activation's output y.
void ActivationBackwardInPlace(torch::Tensor& g, const torch::Tensor& y, Activation a) {
  switch (a) {
    case Activation::kRelu:
      ReluBackwardColumnSums(Data(g), Data(y), g.size(0), g.size(1), nullptr);
      break;
    case Activation::kTanh: at::tanh_backward_out(g, g, y); break;
    case Activation::kSigmoid: at::sigmoid_backward_out(g, g, y); break;
    default: break;
  }
}

// The reason a node is not covered; empty when it is.
std::string Unsupported(const keras::Node& node, bool last) {
  // The input may be of any shape: what consumes it unflattened has an output of more
  // than one axis, and is refused for that.
  if (node.output_shape.size() != 1 && node.layer_class() != LayerClass::kInputLayer) {
    return absl::StrCat("layer '", node.name, "' has output shape of rank ",
                        node.output_shape.size() + 1, ", not a batch of vectors");
  }
  auto activation = [&](Activation a) -> std::string {
    if (Elementwise(a) || (last && a == Activation::kSoftmax)) return "";
    return absl::StrCat("layer '", node.name, "' has an activation other than linear, relu, tanh, "
                        "sigmoid (or softmax at the output)");
  };
  switch (node.layer_class()) {
    case LayerClass::kInputLayer:
      if (std::get<keras::InputLayerConfig>(node.config).dtype != keras::DType::kFloat32) {
        return "the input is not float32";
      }
      return "";
    case LayerClass::kDense:
      return activation(std::get<keras::DenseConfig>(node.config).activation);
    case LayerClass::kActivation:
      return activation(std::get<keras::ActivationConfig>(node.config).activation);
    case LayerClass::kReLU: {
      const auto& c = std::get<keras::ReLUConfig>(node.config);
      if (c.max_value || c.negative_slope != 0.0 || c.threshold != 0.0) {
        return absl::StrCat("ReLU '", node.name, "' is not the plain relu");
      }
      return "";
    }
    case LayerClass::kSoftmax:
      if (last && std::get<keras::SoftmaxConfig>(node.config).axis == 1) return "";
      return absl::StrCat("Softmax '", node.name, "' is not the output's, over its last axis");
    case LayerClass::kFlatten:
    case LayerClass::kAdd:
      return "";
    case LayerClass::kDropout:
      if (std::get<keras::DropoutConfig>(node.config).rate == 0.0) return "";
      return absl::StrCat("Dropout '", node.name, "' drops");
    default:
      return absl::StrCat("layer '", node.name, "' is not Dense, Add, ReLU, Activation, Flatten");
  }
}

}  // namespace

std::unique_ptr<DenseGraph> DenseGraph::Create(KerasModel& model, const keras::LossConfig& loss,
                                               const std::vector<torch::Tensor*>& flat_order,
                                               bool bfloat16, std::string* why_not) {
  auto refuse = [&](std::string why) -> std::unique_ptr<DenseGraph> {
    *why_not = std::move(why);
    return nullptr;
  };
  if (!model.device().is_cpu()) return refuse("the model is not on the CPU");
  if (SgemmLibrary() == GemmLibrary::kNone) return refuse("neither oneDNN nor a CBLAS is loaded");
  if (bfloat16 && !HasBf16Gemm()) {
    return refuse("bfloat16 products need oneDNN's dnnl_gemm_bf16bf16f32, which this CPU cannot run");
  }
  const keras::ModelIr& ir = model.ir();
  const int count = static_cast<int>(ir.nodes.size());
  std::unique_ptr<DenseGraph> g(new DenseGraph());
  g->loss_ = loss;
  g->bfloat16_ = bfloat16;
  g->ops_.resize(count);
  std::vector<int> source(count);  // the node whose buffer holds node i's output
  auto flat_index = [&](torch::Tensor* t) {
    for (size_t k = 0; k < flat_order.size(); ++k) {
      if (flat_order[k] == t) return static_cast<int>(k);
    }
    return -1;
  };
  for (int i = 0; i < count; ++i) {
    const keras::Node& node = ir.nodes[i];
    const bool last = i == count - 1;
    if (std::string why = Unsupported(node, last); !why.empty()) return refuse(why);
    Op& op = g->ops_[i];
    source[i] = i;
    for (int in : node.inputs) {
      if (in < 0 || in >= i) return refuse(absl::StrCat("layer '", node.name, "' comes before its input"));
      op.inputs.push_back(source[in]);
    }
    if (i > 0 && op.inputs.empty()) return refuse(absl::StrCat("layer '", node.name, "' has no input"));
    switch (node.layer_class()) {
      case LayerClass::kInputLayer:
        if (i != 0) return refuse("the model has more than one input");
        op.kind = Kind::kInput;
        break;
      case LayerClass::kDense:
        op.kind = Kind::kDense;
        op.activation = std::get<keras::DenseConfig>(node.config).activation;
        break;
      case LayerClass::kActivation:
        op.kind = Kind::kActivation;
        op.activation = std::get<keras::ActivationConfig>(node.config).activation;
        break;
      case LayerClass::kReLU:
        op.kind = Kind::kActivation;
        op.activation = Activation::kRelu;
        break;
      case LayerClass::kSoftmax:
        op.kind = Kind::kActivation;
        op.activation = Activation::kSoftmax;
        break;
      case LayerClass::kAdd:
        op.kind = Kind::kAdd;
        if (op.inputs.size() < 2) return refuse(absl::StrCat("Add '", node.name, "' has one input"));
        break;
      default:  // Flatten of vectors, Dropout(0): the input itself
        op.kind = Kind::kAlias;
        break;
    }
    if (op.kind == Kind::kActivation && op.activation == Activation::kLinear) op.kind = Kind::kAlias;
    if (op.kind == Kind::kAlias) source[i] = op.inputs.at(0);
  }
  // An activation whose input is a linear Dense or an Add that nothing else reads (a
  // residual block's Add and ReLU, a Dense followed by its ReLU layer) is applied by
  // that node in place: a pass over the block and a copy fewer forward, and backward
  // its gradient goes to the node's inputs without copies between.
  std::vector<int> readers(count, 0);
  for (const Op& op : g->ops_) {
    for (int in : op.inputs) ++readers[in];
  }
  for (int i = 0; i < count; ++i) {
    Op& op = g->ops_[i];
    if (op.kind != Kind::kActivation || op.activation == Activation::kSoftmax) continue;
    const int p = op.inputs[0];
    Op& producer = g->ops_[p];
    if (readers[p] != 1 || producer.activation != Activation::kLinear ||
        (producer.kind != Kind::kDense && producer.kind != Kind::kAdd)) {
      continue;
    }
    producer.activation = op.activation;
    op.kind = Kind::kAlias;
    op.activation = Activation::kLinear;
    for (int j = i; j < count; ++j) {
      if (source[j] == i) source[j] = p;
      for (int& in : g->ops_[j].inputs) in = in == i ? p : in;
    }
  }
  for (ModelVariable& v : model.variables()) {
    Op& op = g->ops_[v.node];
    if (op.kind != Kind::kDense) return refuse("a variable is not a Dense layer's");
    int flat = v.trainable ? flat_index(&v.value) : -1;
    if (v.trainable && flat < 0) return refuse("a trainable variable is not in the flat buffer");
    (v.index == 0 ? op.kernel : op.bias) = &v.value;
    (v.index == 0 ? op.kernel_flat : op.bias_flat) = flat;
    op.needs_grad = op.needs_grad || v.trainable;
  }
  // A node's output needs its gradient when a trainable variable is there or upstream.
  for (int i = 0; i < count; ++i) {
    for (int in : g->ops_[i].inputs) g->ops_[i].needs_grad |= g->ops_[in].needs_grad;
  }
  // Every node feeds the output: so every trainable variable gets its gradient.
  std::vector<bool> feeds(count, false);
  feeds[count - 1] = true;
  for (int i = count - 1; i >= 0; --i) {
    if (!feeds[i]) return refuse(absl::StrCat("layer '", ir.nodes[i].name, "' does not feed the output"));
    for (int in : ir.nodes[i].inputs) feeds[in] = true;
  }

  // The output: logits and whether a softmax follows them.
  Op& out = g->ops_[count - 1];
  g->logits_node_ = source[count - 1];
  if (out.activation == Activation::kSoftmax) {
    g->softmax_ = true;
    if (out.kind == Kind::kDense) {
      out.activation = Activation::kLinear;  // the loss applies the softmax
    } else {
      out.kind = Kind::kAlias;
      g->logits_node_ = out.inputs.at(0);
    }
  }
  if (g->ops_[g->logits_node_].kind == Kind::kInput) return refuse("the model has no layer");
  const bool crossentropy = loss.kind == LossKind::kSparseCategoricalCrossentropy ||
                            loss.kind == LossKind::kCategoricalCrossentropy;
  if (crossentropy && g->softmax_ == loss.from_logits) {
    return refuse(g->softmax_ ? "a cross-entropy from logits of a softmax output"
                              : "a cross-entropy on an output that is not a softmax");
  }
  if (loss.kind == LossKind::kMeanSquaredError && g->softmax_) {
    return refuse("mean squared error of a softmax output");
  }
  if (!crossentropy && loss.kind != LossKind::kMeanSquaredError) {
    return refuse("the loss is not a softmax cross-entropy or mean squared error");
  }
  auto empty = [] { return torch::empty({0}, torch::kFloat32); };
  for (int i = 0; i < count; ++i) {
    g->outputs_.push_back(empty());
    g->grads_.push_back(empty());
  }
  g->grad_set_.assign(count, false);
  g->inputs_bf16_.resize(count);
  g->kernels_bf16_.resize(count);
  g->probabilities_ = empty();
  g->targets_ = empty();
  g->labels_ = torch::empty({0}, torch::kInt64);
  return g;
}

DenseGraph::~DenseGraph() = default;

void DenseGraph::Product(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                         Operand a, int64_t lda, Operand b, int64_t ldb, float beta, float* c,
                         int64_t ldc) const {
  if (bfloat16_) {
    Bf16Gemm(transpose_a, transpose_b, m, n, k, a.bf16, lda, b.bf16, ldb, beta, c, ldc);
  } else {
    Sgemm(transpose_a, transpose_b, m, n, k, a.f32, lda, b.f32, ldb, beta, c, ldc);
  }
}

const uint16_t* DenseGraph::Rounded(const torch::Tensor& values,
                                    std::vector<uint16_t>& buffer) const {
  if (!bfloat16_) return nullptr;
  const size_t n = static_cast<size_t>(values.numel());
  if (buffer.size() < n) buffer.resize(n);
  ToBfloat16({values.data_ptr<float>(), n}, buffer.data());
  return buffer.data();
}

DenseGraph::Forward DenseGraph::RunForward(const torch::Tensor& x, const torch::Tensor& y,
                                           double scale) {
  torch::NoGradGuard no_grad;
  const int64_t n = x.size(0);
  for (size_t i = 0; i < ops_.size(); ++i) {
    Op& op = ops_[i];
    torch::Tensor& out = outputs_[i];
    switch (op.kind) {
      case Kind::kInput:  // kept until the backward reads it; Flatten's rows (an alias)
        out = x.contiguous();
        if (out.dim() != 2) out = out.reshape({n, -1});
        break;
      case Kind::kAlias:
        break;
      case Kind::kDense: {
        const torch::Tensor& in = outputs_[op.inputs[0]];
        const int64_t k = op.kernel->size(0), units = op.kernel->size(1);
        Shaped(out, n, units);
        Operand input{Data(in), Rounded(in, inputs_bf16_[i])};
        Operand kernel{Data(*op.kernel), Rounded(*op.kernel, kernels_bf16_[i])};
        Product(false, false, n, units, k, input, k, kernel, units, 0.0f, Data(out), units);
        const bool relu = op.activation == Activation::kRelu;
        AddBiasRelu(Data(out), op.bias != nullptr ? Data(*op.bias) : nullptr, n, units, relu);
        if (!relu) ActivateInPlace(out, op.activation);
        break;
      }
      case Kind::kActivation: {
        const torch::Tensor& in = outputs_[op.inputs[0]];
        Shaped(out, n, in.size(1)).copy_(in);
        ActivateInPlace(out, op.activation);
        break;
      }
      case Kind::kAdd: {
        const torch::Tensor& first = outputs_[op.inputs[0]];
        Shaped(out, n, first.size(1));
        // Summed in input order, as Keras' Add; a rectifier in the last pass.
        const bool relu = op.activation == Activation::kRelu;
        const float* sum = Data(first);
        for (size_t k = 1; k < op.inputs.size(); ++k) {
          AddRelu(sum, Data(outputs_[op.inputs[k]]), out.numel(),
                  relu && k + 1 == op.inputs.size(), Data(out));
          sum = Data(out);
        }
        if (!relu) ActivateInPlace(out, op.activation);
        break;
      }
    }
  }

  const torch::Tensor& z = outputs_[logits_node_];
  const int64_t classes = z.size(1);
  grad_set_.assign(ops_.size(), false);
  float* gradient = Data(Shaped(grads_[logits_node_], n, classes));
  grad_set_[logits_node_] = true;
  float* probabilities = softmax_ ? Data(Shaped(probabilities_, n, classes)) : nullptr;
  const float s = static_cast<float>(scale);
  Forward result;
  if (loss_.kind == LossKind::kSparseCategoricalCrossentropy) {
    // The batch's own labels when they are int64 already (the data loader's), else a copy.
    const int64_t* labels = nullptr;
    if (y.scalar_type() == torch::kLong && y.is_contiguous() && y.numel() == n) {
      labels = y.data_ptr<int64_t>();
    } else {
      labels_.resize_({n});
      labels_.copy_(y.reshape({n}));
      labels = labels_.data_ptr<int64_t>();
    }
    result.loss_sum = SoftmaxCrossEntropy(Data(z), n, classes, labels, nullptr, 0.0f, s,
                                          probabilities, gradient);
  } else {
    Shaped(targets_, n, classes).copy_(y.reshape({n, classes}));
    result.loss_sum =
        loss_.kind == LossKind::kMeanSquaredError
            ? SquaredError(Data(z), Data(targets_), n, classes, s, gradient)
            : SoftmaxCrossEntropy(Data(z), n, classes, nullptr, Data(targets_),
                                  static_cast<float>(loss_.label_smoothing), s, probabilities,
                                  gradient);
  }
  result.prediction = softmax_ ? probabilities_ : z;
  return result;
}

void DenseGraph::AddGradient(int node, torch::Tensor& gradient, bool take) {
  if (grad_set_[node]) {
    grads_[node].add_(gradient);
  } else if (take) {
    std::swap(grads_[node], gradient);
  } else {
    Shaped(grads_[node], gradient.size(0), gradient.size(1)).copy_(gradient);
  }
  grad_set_[node] = true;
}

void DenseGraph::RunBackward(const std::function<void(int)>& ready) {
  torch::NoGradGuard no_grad;
  for (int i = static_cast<int>(ops_.size()) - 1; i >= 0; --i) {
    if (!grad_set_[i]) continue;
    Op& op = ops_[i];
    torch::Tensor& g = grads_[i];
    switch (op.kind) {
      case Kind::kInput:
      case Kind::kAlias:
        break;
      case Kind::kDense: {
        const int in = op.inputs[0];
        const int64_t n = g.size(0), k = op.kernel->size(0), units = op.kernel->size(1);
        // The activation's derivative, and the bias' gradient in the same pass.
        const bool relu = op.activation == Activation::kRelu;
        if (!relu) ActivationBackwardInPlace(g, outputs_[i], op.activation);
        torch::Tensor bias_grad = op.bias_flat >= 0 ? op.bias->grad() : torch::Tensor();
        ReluBackwardColumnSums(Data(g), relu ? Data(outputs_[i]) : nullptr, n, units,
                               bias_grad.defined() ? Data(bias_grad) : nullptr);
        Operand gradient{Data(g), Rounded(g, grad_bf16_)};
        if (op.kernel_flat >= 0) {
          torch::Tensor kernel_grad = op.kernel->grad();  // kernel_grad = in^T g
          Operand input{Data(outputs_[in]), inputs_bf16_[i].data()};
          Product(true, false, k, units, n, input, k, gradient, units, 0.0f, Data(kernel_grad),
                  units);
          ready(op.kernel_flat);
        }
        if (bias_grad.defined()) ready(op.bias_flat);
        if (!ops_[in].needs_grad) break;
        // The input's gradient, g kernel^T, added to what its other consumers gave.
        const float beta = grad_set_[in] ? 1.0f : 0.0f;
        if (!grad_set_[in]) Shaped(grads_[in], n, k);
        grad_set_[in] = true;
        Operand kernel{Data(*op.kernel), kernels_bf16_[i].data()};
        Product(false, true, n, k, units, gradient, units, kernel, units, beta, Data(grads_[in]),
                k);
        break;
      }
      case Kind::kActivation:
        if (!ops_[op.inputs[0]].needs_grad) break;
        ActivationBackwardInPlace(g, outputs_[i], op.activation);
        AddGradient(op.inputs[0], g, /*take=*/true);
        break;
      case Kind::kAdd: {
        ActivationBackwardInPlace(g, outputs_[i], op.activation);
        size_t last = op.inputs.size();  // the last input that needs the gradient takes g
        for (size_t k = 0; k < op.inputs.size(); ++k) {
          if (ops_[op.inputs[k]].needs_grad) last = k;
        }
        for (size_t k = 0; k < op.inputs.size(); ++k) {
          if (ops_[op.inputs[k]].needs_grad) AddGradient(op.inputs[k], g, k == last);
        }
        break;
      }
    }
  }
}

}  // namespace cohort::trainer
