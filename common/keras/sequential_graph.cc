// Layer entries, and the graph of a Sequential model: a chain in list order.

#include <string>

#include "absl/strings/str_cat.h"
#include "common/keras/layer_parser.h"
#include "common/keras/model_graph.h"

namespace cohort::keras::internal {
namespace {

bool IsModelClass(absl::string_view class_name) {
  return class_name == "Sequential" || class_name == "Functional" || class_name == "Model";
}

}  // namespace

absl::Status Keras2Error(absl::string_view sign) {
  return absl::InvalidArgumentError(
      absl::StrCat("this is a Keras 2 (tf.keras) model config (", sign,
                   "); Cohort reads Keras 3 configs: load the model with Keras 3 "
                   "(keras.models.load_model) and save it again as a .keras file"));
}

absl::StatusOr<Node> ParseLayerEntry(const Json& entry, size_t index) {
  std::string where = absl::StrCat("layer #", index);
  if (!entry.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " is ", Describe(entry), ", not an object"));
  }
  FieldReader fields(entry, where);
  COHORT_ASSIGN_OR_RETURN(std::string class_name, fields.String("class_name"));
  const Json* config = fields.Find("config");
  if (config == nullptr || !config->is_object()) {
    return fields.Error(absl::StrCat("(", class_name, ") has no config object"));
  }
  FieldReader config_fields(*config, where);
  COHORT_ASSIGN_OR_RETURN(std::string name, config_fields.String("name", ""));
  if (name.empty()) {
    COHORT_ASSIGN_OR_RETURN(name, fields.String("name", ""));
  }
  std::string context = name.empty() ? absl::StrCat(where, " (", class_name, ")")
                                     : absl::StrCat("layer '", name, "' (", class_name, ")");
  if (IsModelClass(class_name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(context,
                     " is a nested model; Cohort does not support models inside models "
                     "(build the outer model from the inner model's layers)"));
  }
  std::optional<LayerClass> layer_class = LayerClassFromName(class_name);
  const Json* registered = fields.Find("registered_name");
  if (registered != nullptr && !(registered->is_string() && *registered == class_name)) {
    std::string custom = registered->is_string() ? registered->get<std::string>() : class_name;
    return absl::InvalidArgumentError(
        absl::StrCat(context, " is the custom class ", custom,
                     ", which Cohort does not support; supported: ", SupportedLayerClassNames()));
  }
  if (!layer_class) {
    std::string who = name.empty() ? where : absl::StrCat("layer '", name, "'");
    return absl::InvalidArgumentError(
        absl::StrCat(who, " has class ", class_name,
                     ", which Cohort does not support; supported: ", SupportedLayerClassNames()));
  }
  if (name.empty()) return fields.Error(absl::StrCat("(", class_name, ") has no name"));
  Node node;
  node.name = name;
  FieldReader layer_config(*config, context);
  COHORT_ASSIGN_OR_RETURN(node.trainable, layer_config.Bool("trainable", true));
  COHORT_ASSIGN_OR_RETURN(node.config, ParseLayerConfig(*layer_class, layer_config));
  return node;
}

absl::StatusOr<const Json*> LayerList(const FieldReader& model_config, const ModelLimits& limits) {
  const Json* layers = model_config.Find("layers");
  if (layers == nullptr || !layers->is_array()) {
    return model_config.Error("field 'layers' must be a list");
  }
  if (static_cast<int64_t>(layers->size()) > limits.max_layers) {
    return absl::InvalidArgumentError(absl::StrCat(model_config.context(), " has ", layers->size(),
                                                   " layers, more than the limit of ",
                                                   limits.max_layers));
  }
  return layers;
}

absl::StatusOr<std::vector<Node>> ParseSequentialGraph(const FieldReader& model_config,
                                                       const ModelLimits& limits) {
  absl::StatusOr<const Json*> layer_list = LayerList(model_config, limits);
  if (!layer_list.ok()) return layer_list.status();
  const Json* layers = *layer_list;
  std::vector<Node> nodes;
  for (size_t i = 0; i < layers->size(); ++i) {
    const Json& entry = (*layers)[i];
    if (const Json* inbound = FieldReader(entry, "").Find("inbound_nodes")) {
      if (inbound->is_array() && !inbound->empty() && (*inbound)[0].is_array()) {
        return Keras2Error("list-style inbound_nodes");
      }
    }
    COHORT_ASSIGN_OR_RETURN(Node node, ParseLayerEntry(entry, i));
    bool is_input = node.layer_class() == LayerClass::kInputLayer;
    if (is_input && i > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer '", node.name, "' (InputLayer) is not the first layer of the Sequential model"));
    }
    nodes.push_back(std::move(node));
  }
  if (nodes.empty() || nodes[0].layer_class() != LayerClass::kInputLayer) {
    // Built with model.build(shape) and no keras.Input: build_input_shape holds the shape.
    const Json* raw = model_config.Find("build_input_shape");
    if (raw == nullptr) {
      return absl::InvalidArgumentError(
          "the Sequential model has no input shape: it was never built (start it with "
          "keras.Input(shape=...))");
    }
    Json input_config = {{"batch_shape", *raw}, {"name", "input_layer"}};
    Json entry = {{"class_name", "InputLayer"}, {"config", input_config}};
    COHORT_ASSIGN_OR_RETURN(Node input, ParseLayerEntry(entry, 0));
    nodes.insert(nodes.begin(), std::move(input));
  }
  for (size_t i = 1; i < nodes.size(); ++i) {
    nodes[i].inputs = {static_cast<int>(i) - 1};
  }
  return nodes;
}

}  // namespace cohort::keras::internal
