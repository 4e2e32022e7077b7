#include "common/keras/model_config.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/keras/model_graph.h"
#include "common/keras/shape_math.h"
#include "common/keras/weights_layout.h"

namespace cohort::keras {
namespace {

using internal::FieldReader;
using internal::Json;

absl::StatusOr<Json> ParseJson(absl::string_view text) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    // nlohmann quotes the last token read: keep the message short and printable.
    std::string what = std::string(e.what()).substr(0, 300);
    for (char& c : what) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    }
    return absl::InvalidArgumentError(absl::StrCat("the model config is not valid JSON: ", what));
  }
}

// Keras 2 writes keras_version/backend at the top and batch_input_shape on the first
// layer; its Functional inbound_nodes are nested lists (found while reading layers).
absl::Status CheckNotKeras2(const FieldReader& root, const FieldReader& config) {
  if (const Json* version = root.Find("keras_version");
      version != nullptr && version->is_string() &&
      absl::StartsWith(version->get<std::string>(), "2.")) {
    return internal::Keras2Error(absl::StrCat("keras_version ", version->get<std::string>()));
  }
  if (root.Find("backend") != nullptr) return internal::Keras2Error("a top-level 'backend' field");
  const Json* layers = config.Find("layers");
  if (layers != nullptr && layers->is_array()) {
    for (const Json& layer : *layers) {
      const Json* layer_config = FieldReader(layer, "").Find("config");
      if (layer_config != nullptr &&
          FieldReader(*layer_config, "").Find("batch_input_shape") != nullptr) {
        return internal::Keras2Error("batch_input_shape");
      }
    }
  }
  return absl::OkStatus();
}

// Puts the resolved value of every Keras axis into the config, now that input ranks
// are known (InferShapes has checked they are in range).
struct AxisResolver {
  size_t rank;
  int Resolve(int axis) const { return *internal::NormalizeAxis(axis, rank); }
  void operator()(BatchNormalizationConfig& c) const { c.axis = Resolve(c.axis); }
  void operator()(LayerNormalizationConfig& c) const {
    for (int& a : c.axes) a = Resolve(a);
    std::sort(c.axes.begin(), c.axes.end());
  }
  void operator()(SoftmaxConfig& c) const { c.axis = Resolve(c.axis); }
  void operator()(ConcatenateConfig& c) const { c.axis = Resolve(c.axis); }
  template <typename Config>
  void operator()(Config&) const {}
};

absl::Status NodeError(const Node& node, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat("layer '", node.name, "' (", LayerClassName(node.layer_class()), ") ", message));
}

// Shapes, resolved axes, weights with their h5 paths, parameter counts and limits.
absl::Status Resolve(ModelIr& model, const ModelLimits& limits) {
  if (model.nodes.size() < 2) {
    return absl::InvalidArgumentError("the model has no layers besides its input");
  }
  COHORT_ASSIGN_OR_RETURN(std::vector<Shape> shapes,
                         InferShapes(model, model.input_config().shape, limits));
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    Node& node = model.nodes[i];
    node.output_shape = shapes[i];
    if (node.inputs.empty()) continue;
    const Shape& in = shapes[node.inputs[0]];
    std::visit(AxisResolver{in.size()}, node.config);
    node.weights = internal::MakeWeights(node, in);
    for (const WeightSpec& w : node.weights) {
      std::optional<int64_t> n = internal::NumElements(w.shape);
      if (n) n = internal::CheckedAdd(node.param_count, *n);
      if (!n || *n > limits.max_parameters) {
        return NodeError(
            node, absl::StrCat("has more parameters than the limit of ", limits.max_parameters,
                               " (its ", w.name, " is ", ShapeToString(w.shape), ")"));
      }
      node.param_count = *n;
      if (w.trainable) model.trainable_param_count += internal::NumElements(w.shape).value();
    }
    std::optional<int64_t> total = internal::CheckedAdd(model.param_count, node.param_count);
    if (!total || *total > limits.max_parameters) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model has more parameters than the limit of ", limits.max_parameters,
                       " (reached at layer '", node.name, "')"));
    }
    model.param_count = *total;
  }
  // Groups are named in model.layers order, which is node order; a Sequential model's
  // InputLayer is not in model.layers.
  std::map<std::string, int> used;
  for (size_t i = model.kind == ModelKind::kSequential ? 1 : 0; i < model.nodes.size(); ++i) {
    Node& node = model.nodes[i];
    std::string snake = internal::ToSnakeCase(LayerClassName(node.layer_class()));
    int k = used[snake]++;
    node.weights_group =
        k == 0 ? absl::StrCat("layers/", snake) : absl::StrCat("layers/", snake, "_", k);
    for (size_t j = 0; j < node.weights.size(); ++j) {
      node.weights[j].h5_path = absl::StrCat(node.weights_group, "/vars/", j);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelIr> ParseModelConfig(absl::string_view json, const ModelLimits& limits) {
  COHORT_ASSIGN_OR_RETURN(Json root, ParseJson(json));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model config must be a JSON object, got ", internal::Describe(root)));
  }
  FieldReader top(root, "the model config");
  COHORT_ASSIGN_OR_RETURN(std::string class_name, top.String("class_name"));
  const Json* config_json = top.Find("config");
  if (config_json == nullptr || !config_json->is_object()) {
    return top.Error("field 'config' must be an object");
  }
  FieldReader config(*config_json, absl::StrCat("the ", class_name, " model"));
  COHORT_RETURN_IF_ERROR(CheckNotKeras2(top, config));

  ModelIr model;
  COHORT_ASSIGN_OR_RETURN(model.name, config.String("name", ""));
  if (class_name == "Sequential") {
    model.kind = ModelKind::kSequential;
    COHORT_ASSIGN_OR_RETURN(model.nodes, internal::ParseSequentialGraph(config, limits));
  } else if (class_name == "Functional") {
    model.kind = ModelKind::kFunctional;
    COHORT_ASSIGN_OR_RETURN(model.nodes, internal::ParseFunctionalGraph(config, limits));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model is a ", class_name,
        "; Cohort supports Sequential and Functional models (a subclassed model's config "
        "has no layer graph)"));
  }
  COHORT_RETURN_IF_ERROR(Resolve(model, limits));

  const Json* compile = top.Find("compile_config");
  if (compile != nullptr && !(compile->is_object() && compile->empty())) {
    COHORT_ASSIGN_OR_RETURN(model.compile, ParseCompileConfig(*compile));
  }
  return model;
}

}  // namespace cohort::keras
