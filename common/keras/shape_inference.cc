#include "common/keras/shape_inference.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/keras/shape_math.h"
#include "common/status_macros.h"

namespace cohort::keras {
namespace {

using internal::CheckedAdd;
using internal::CheckedMul;
using internal::NormalizeAxis;
using internal::NumElements;

template <size_t N>
std::string TupleToString(const std::array<int64_t, N>& values) {
  return ShapeToString(Shape(values.begin(), values.end()));
}

// Computes one node's output shape from its inputs' shapes.
class NodeShapes {
 public:
  NodeShapes(const Node& node, std::vector<const Shape*> inputs)
      : node_(node), inputs_(std::move(inputs)) {}

  absl::Status Error(absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer '", node_.name, "' (", LayerClassName(node_.layer_class()), ") ", message));
  }

  // "gets inputs of shapes (8, 8, 16) and (8, 8, 32)"
  std::string InputsText() const {
    std::vector<std::string> parts;
    for (const Shape* s : inputs_) parts.push_back(ShapeToString(*s));
    if (parts.size() == 1) return absl::StrCat("gets an input of shape ", parts[0]);
    std::string last = parts.back();
    parts.pop_back();
    return absl::StrCat("gets inputs of shapes ", absl::StrJoin(parts, ", "), " and ", last);
  }

  const Shape& in() const { return *inputs_[0]; }

  absl::StatusOr<Shape> operator()(const InputLayerConfig&) const {
    return Error("is an InputLayer inside the model");
  }

  absl::StatusOr<Shape> operator()(const DenseConfig& c) const {
    if (in().empty() || in().back() == kUnknownDim) {
      return Error(absl::StrCat(InputsText(), "; Dense needs a known last dimension"));
    }
    Shape out = in();
    out.back() = c.units;
    return out;
  }

  template <int N>
  absl::StatusOr<Shape> operator()(const ConvConfig<N>& c) const {
    if (in().size() != N + 1) {
      return Error(absl::StrCat(InputsText(), "; ", LayerClassName(node_.layer_class()),
                                " needs inputs of rank ", N + 1, " (",
                                N == 1 ? "steps" : "rows, cols", ", channels)"));
    }
    int64_t channels = in().back();
    if (channels == kUnknownDim)
      return Error(absl::StrCat(InputsText(), "; channels must be known"));
    if (channels % c.groups != 0) {
      return Error(absl::StrCat(InputsText(), "; its ", channels,
                                " channels are not a multiple of groups (", c.groups, ")"));
    }
    Shape out = in();
    for (int i = 0; i < N; ++i) {
      int64_t length = in()[i];
      if (length == kUnknownDim) continue;
      if (c.padding != Padding::kValid) {
        out[i] = (length - 1) / c.strides[i] + 1;
        continue;
      }
      std::optional<int64_t> span = CheckedMul(c.dilation_rate[i], c.kernel_size[i] - 1);
      if (span) span = CheckedAdd(*span, 1);
      if (!span || length < *span) {
        return Error(absl::StrCat(InputsText(), ", smaller than its kernel ",
                                  TupleToString(c.kernel_size), " with dilation ",
                                  TupleToString(c.dilation_rate), " and padding valid"));
      }
      out[i] = (length - *span) / c.strides[i] + 1;
    }
    out.back() = c.filters;
    return out;
  }

  template <int N, PoolOp kOp>
  absl::StatusOr<Shape> operator()(const PoolingConfig<N, kOp>& c) const {
    if (in().size() != N + 1) {
      return Error(absl::StrCat(InputsText(), "; ", LayerClassName(node_.layer_class()),
                                " needs inputs of rank ", N + 1));
    }
    Shape out = in();
    for (int i = 0; i < N; ++i) {
      int64_t length = in()[i];
      if (length == kUnknownDim) continue;
      if (c.padding == Padding::kSame) {
        out[i] = (length - 1) / c.strides[i] + 1;
      } else if (length < c.pool_size[i]) {
        return Error(absl::StrCat(InputsText(), ", smaller than its pool ",
                                  TupleToString(c.pool_size), " with padding valid"));
      } else {
        out[i] = (length - c.pool_size[i]) / c.strides[i] + 1;
      }
    }
    return out;
  }

  template <int N, PoolOp kOp>
  absl::StatusOr<Shape> operator()(const GlobalPoolingConfig<N, kOp>& c) const {
    if (in().size() != N + 1) {
      return Error(absl::StrCat(InputsText(), "; ", LayerClassName(node_.layer_class()),
                                " needs inputs of rank ", N + 1));
    }
    if (!c.keepdims) return Shape{in().back()};
    Shape out(N, 1);
    out.push_back(in().back());
    return out;
  }

  absl::StatusOr<Shape> operator()(const FlattenConfig&) const {
    if (internal::HasUnknownDim(in())) return Shape{kUnknownDim};
    std::optional<int64_t> n = NumElements(in());
    if (!n) return Error(absl::StrCat(InputsText(), ", too large to flatten"));
    return Shape{*n};
  }

  absl::StatusOr<Shape> operator()(const ReshapeConfig& c) const {
    Shape out(c.target_shape.begin(), c.target_shape.end());
    auto wildcard = std::find(out.begin(), out.end(), -1);
    if (internal::HasUnknownDim(in())) return out;  // the -1 stays unknown, as in Keras
    std::optional<int64_t> in_size = NumElements(in());
    int64_t known = 1;
    for (int64_t d : out) {
      if (d == -1) continue;
      std::optional<int64_t> m = CheckedMul(known, d);
      if (!m) return Error("has a target_shape too large");
      known = *m;
    }
    if (!in_size) return Error(absl::StrCat(InputsText(), ", too large to reshape"));
    bool ok = wildcard == out.end() ? known == *in_size : *in_size % known == 0;
    if (!ok) {
      return Error(absl::StrCat(
          InputsText(), " of ", *in_size, " elements, which cannot be reshaped to ", "(",
          absl::StrJoin(c.target_shape, ", "), c.target_shape.size() == 1 ? ",)" : ")"));
    }
    if (wildcard != out.end()) *wildcard = *in_size / known;
    return out;
  }

  absl::StatusOr<Shape> operator()(const DropoutConfig& c) const {
    if (c.noise_shape && c.noise_shape->size() != in().size() + 1) {
      return Error(absl::StrCat(InputsText(), " but its noise_shape has ", c.noise_shape->size(),
                                " entries (batch included)"));
    }
    return in();
  }

  absl::StatusOr<Shape> operator()(const BatchNormalizationConfig& c) const {
    COHORT_RETURN_IF_ERROR(CheckFeatureAxis(c.axis));
    return in();
  }

  absl::StatusOr<Shape> operator()(const LayerNormalizationConfig& c) const {
    std::vector<int> seen;
    for (int axis : c.axes) {
      COHORT_RETURN_IF_ERROR(CheckFeatureAxis(axis));
      int a = *NormalizeAxis(axis, in().size());
      if (std::find(seen.begin(), seen.end(), a) != seen.end()) {
        return Error(absl::StrCat("lists axis ", a, " twice"));
      }
      seen.push_back(a);
    }
    return in();
  }

  absl::StatusOr<Shape> operator()(const ActivationConfig&) const { return in(); }
  absl::StatusOr<Shape> operator()(const ReLUConfig&) const { return in(); }

  absl::StatusOr<Shape> operator()(const SoftmaxConfig& c) const {
    COHORT_RETURN_IF_ERROR(SampleAxis(c.axis, in()).status());
    return in();
  }

  absl::StatusOr<Shape> operator()(const EmbeddingConfig& c) const {
    Shape out = in();
    out.push_back(c.output_dim);
    return out;
  }

  absl::StatusOr<Shape> operator()(const AddConfig&) const {
    Shape out = in();
    for (const Shape* s : inputs_) {
      if (s->size() != out.size())
        return Error(absl::StrCat(InputsText(), ", which cannot be added"));
      for (size_t i = 0; i < out.size(); ++i) {
        int64_t a = out[i], b = (*s)[i];
        if (a == kUnknownDim || b == kUnknownDim) {
          out[i] = a == 1 ? b : (b == 1 ? a : kUnknownDim);
        } else if (a == 1) {
          out[i] = b;
        } else if (b != 1 && a != b) {
          return Error(absl::StrCat(InputsText(), ", which cannot be added"));
        }
      }
    }
    return out;
  }

  absl::StatusOr<Shape> operator()(const ConcatenateConfig& c) const {
    COHORT_ASSIGN_OR_RETURN(int axis, SampleAxis(c.axis, in()));
    Shape out = in();
    for (size_t k = 1; k < inputs_.size(); ++k) {
      const Shape& s = *inputs_[k];
      bool ok = s.size() == out.size();
      for (size_t i = 0; ok && i < out.size(); ++i) {
        if (static_cast<int>(i) == axis) continue;
        ok = out[i] == s[i] || out[i] == kUnknownDim || s[i] == kUnknownDim;
        if (out[i] == kUnknownDim) out[i] = s[i];
      }
      if (!ok) {
        return Error(
            absl::StrCat(InputsText(), ", which cannot be concatenated on axis ", axis + 1));
      }
      if (out[axis] == kUnknownDim || s[axis] == kUnknownDim) {
        out[axis] = kUnknownDim;
      } else {
        std::optional<int64_t> sum = CheckedAdd(out[axis], s[axis]);
        if (!sum) return Error(absl::StrCat(InputsText(), ", too large to concatenate"));
        out[axis] = *sum;
      }
    }
    return out;
  }

 private:
  // `axis` (Keras', batch included) as an index into the per-sample shape `s`.
  absl::StatusOr<int> SampleAxis(int axis, const Shape& s) const {
    std::optional<int> a = NormalizeAxis(axis, s.size());
    if (!a) return Error(absl::StrCat(InputsText(), " but its axis ", axis, " is out of range"));
    if (*a == 0) return Error("has axis 0, the batch axis, which Cohort does not support");
    return *a - 1;
  }

  // An axis whose size must be known (normalization layers create weights along it).
  absl::Status CheckFeatureAxis(int axis) const {
    COHORT_ASSIGN_OR_RETURN(int a, SampleAxis(axis, in()));
    if (in()[a] == kUnknownDim) {
      return Error(absl::StrCat(InputsText(), " but its axis ", a + 1, " must have a known size"));
    }
    return absl::OkStatus();
  }

  const Node& node_;
  std::vector<const Shape*> inputs_;
};

bool IsMerge(LayerClass c) { return c == LayerClass::kAdd || c == LayerClass::kConcatenate; }

}  // namespace

absl::StatusOr<std::vector<Shape>> InferShapes(const ModelIr& model, const Shape& input_shape,
                                               const ModelLimits& limits) {
  std::vector<Shape> shapes;
  shapes.reserve(model.nodes.size());
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    const Node& node = model.nodes[i];
    NodeShapes rule(node, {});
    Shape out;
    if (i == 0) {
      if (node.layer_class() != LayerClass::kInputLayer || !node.inputs.empty()) {
        return absl::InvalidArgumentError("the model's first node is not its InputLayer");
      }
      out = input_shape;
    } else {
      size_t want = node.inputs.size();
      if (want == 0 || (want > 1 && !IsMerge(node.layer_class()))) {
        return rule.Error(absl::StrCat("is called on ", want, " inputs"));
      }
      std::vector<const Shape*> inputs;
      for (int producer : node.inputs) {
        if (producer < 0 || static_cast<size_t>(producer) >= i) {
          return rule.Error("takes an input that is not computed before it");
        }
        inputs.push_back(&shapes[producer]);
      }
      COHORT_ASSIGN_OR_RETURN(out, std::visit(NodeShapes(node, std::move(inputs)), node.config));
    }
    std::optional<int64_t> elements = NumElements(out);
    if (!internal::HasUnknownDim(out) &&
        (!elements || *elements > limits.max_activation_elements)) {
      return rule.Error(absl::StrCat("outputs ", ShapeToString(out),
                                     " per sample, more than the limit of ",
                                     limits.max_activation_elements, " elements"));
    }
    shapes.push_back(std::move(out));
  }
  return shapes;
}

}  // namespace cohort::keras
