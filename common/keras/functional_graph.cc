// The graph of a Functional model: layers connected by the `__keras_tensor__` args of
// their inbound_nodes, sorted topologically.

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/keras/model_graph.h"

namespace cohort::keras::internal {
namespace {

absl::Status LayerError(const Node& node, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat("layer '", node.name, "' (", LayerClassName(node.layer_class()), ") ", message));
}

// The layer name of a [name, node_index, tensor_index] triple that must refer to the
// first call and first output of that layer.
absl::StatusOr<std::string> HistoryLayer(const Json& history, absl::string_view what) {
  if (!history.is_array() || history.size() != 3 || !history[0].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " must be a [layer_name, node_index, tensor_index] triple, got ", Describe(history)));
  }
  std::string name = history[0].get<std::string>();
  std::optional<int64_t> node_index = AsInt64(history[1]);
  std::optional<int64_t> tensor_index = AsInt64(history[2]);
  if (!node_index || !tensor_index) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " for '", name, "' has non-integer indices"));
  }
  if (*node_index != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name,
                     "' is used more than once (a shared layer), which Cohort does not support"));
  }
  if (*tensor_index != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " takes output ", *tensor_index,
                                                   " of layer '", name, "', which has one output"));
  }
  return name;
}

// "input_layers"/"output_layers": one triple, a list of triples, or a dict of them.
absl::StatusOr<std::string> SingleEndpoint(const FieldReader& config, absl::string_view key,
                                           absl::string_view what) {
  const Json* value = config.Find(key);
  if (value == nullptr) return config.Error(absl::StrCat("field '", key, "' is missing"));
  std::vector<const Json*> triples;
  if (value->is_object()) {
    for (const Json& t : *value) triples.push_back(&t);
  } else if (value->is_array() && !value->empty() && value->at(0).is_string()) {
    triples.push_back(value);
  } else if (value->is_array()) {
    for (const Json& t : *value) triples.push_back(&t);
  } else {
    return config.Error(absl::StrCat("field '", key, "' must be a list, got ", Describe(*value)));
  }
  std::vector<std::string> names;
  for (const Json* t : triples) {
    COHORT_ASSIGN_OR_RETURN(std::string name, HistoryLayer(*t, absl::StrCat("an entry of ", key)));
    names.push_back(absl::StrCat("'", name, "'"));
  }
  if (names.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("the model has ", names.size(), " ", what, "s (",
                                                   absl::StrJoin(names, ", "),
                                                   "); Cohort supports models with one ", what));
  }
  return names[0].substr(1, names[0].size() - 2);
}

// The producer of one `__keras_tensor__` argument.
absl::StatusOr<std::string> TensorProducer(const Node& node, const Json& tensor) {
  FieldReader fields(tensor, absl::StrCat("layer '", node.name, "'"));
  auto class_name = fields.String("class_name");
  const Json* config = fields.Find("config");
  if (!class_name.ok() || *class_name != "__keras_tensor__" || config == nullptr) {
    return LayerError(node, absl::StrCat("is called on ", Describe(tensor),
                                         " where a __keras_tensor__ was expected"));
  }
  const Json* history = FieldReader(*config, "").Find("keras_history");
  if (history == nullptr) return LayerError(node, "has an input tensor without keras_history");
  return HistoryLayer(*history,
                      absl::StrCat("the keras_history of an input of layer '", node.name, "'"));
}

// The producers' names of `node`'s one call, from its layer entry.
absl::StatusOr<std::vector<std::string>> Producers(const Node& node, const Json& entry) {
  auto it = entry.find("inbound_nodes");
  if (it == entry.end() || it->is_null() || (it->is_array() && it->empty())) {
    if (node.layer_class() == LayerClass::kInputLayer) return std::vector<std::string>();
    return LayerError(node, "is not connected to anything (no inbound_nodes)");
  }
  const Json& inbound = *it;
  if (!inbound.is_array()) return LayerError(node, "has inbound_nodes that are not a list");
  if (inbound[0].is_array()) return Keras2Error("list-style inbound_nodes");
  if (node.layer_class() == LayerClass::kInputLayer) return LayerError(node, "has inbound_nodes");
  if (inbound.size() > 1) {
    return LayerError(node, absl::StrCat("is called ", inbound.size(),
                                         " times (a shared layer), which Cohort does not support"));
  }
  FieldReader call(inbound[0], absl::StrCat("layer '", node.name, "'"));
  const Json* args = call.Find("args");
  if (args == nullptr || !args->is_array() || args->size() != 1) {
    return LayerError(node, "must be called on exactly one positional argument");
  }
  if (const Json* kwargs = call.Find("kwargs")) {
    if (!kwargs->is_object()) return LayerError(node, "has kwargs that are not an object");
    for (const auto& [key, value] : kwargs->items()) {
      // `training` is decided by fit/predict in Keras' Functional call, whatever the node says.
      if (key == "training" || value.is_null()) continue;
      return LayerError(node, absl::StrCat("is called with the keyword argument '", key,
                                           "', which Cohort does not support"));
    }
  }
  const Json& arg = (*args)[0];
  bool merge =
      node.layer_class() == LayerClass::kAdd || node.layer_class() == LayerClass::kConcatenate;
  std::vector<std::string> producers;
  if (merge) {
    if (!arg.is_array() || arg.empty())
      return LayerError(node, "must be called on a list of tensors");
    for (const Json& t : arg) {
      COHORT_ASSIGN_OR_RETURN(std::string p, TensorProducer(node, t));
      producers.push_back(std::move(p));
    }
  } else {
    COHORT_ASSIGN_OR_RETURN(std::string p, TensorProducer(node, arg));
    producers.push_back(std::move(p));
  }
  return producers;
}

}  // namespace

absl::StatusOr<std::vector<Node>> ParseFunctionalGraph(const FieldReader& model_config,
                                                       const ModelLimits& limits) {
  absl::StatusOr<const Json*> layer_list = LayerList(model_config, limits);
  if (!layer_list.ok()) return layer_list.status();
  const Json* layers = *layer_list;
  // Nodes in config (model.layers) order first.
  std::vector<Node> nodes;
  std::map<std::string, int> index_of;
  for (size_t i = 0; i < layers->size(); ++i) {
    COHORT_ASSIGN_OR_RETURN(Node node, ParseLayerEntry((*layers)[i], i));
    if (!index_of.emplace(node.name, static_cast<int>(i)).second) {
      return absl::InvalidArgumentError(absl::StrCat("two layers are named '", node.name, "'"));
    }
    nodes.push_back(std::move(node));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    COHORT_ASSIGN_OR_RETURN(std::vector<std::string> producers, Producers(nodes[i], (*layers)[i]));
    for (const std::string& p : producers) {
      auto it = index_of.find(p);
      if (it == index_of.end()) {
        return LayerError(nodes[i], absl::StrCat("takes the output of '", p,
                                                 "', which is not a layer of the model"));
      }
      nodes[i].inputs.push_back(it->second);
    }
  }
  COHORT_ASSIGN_OR_RETURN(std::string input_name,
                         SingleEndpoint(model_config, "input_layers", "input"));
  COHORT_ASSIGN_OR_RETURN(std::string output_name,
                         SingleEndpoint(model_config, "output_layers", "output"));
  auto input_it = index_of.find(input_name);
  auto output_it = index_of.find(output_name);
  if (input_it == index_of.end() || output_it == index_of.end()) {
    return model_config.Error("input_layers or output_layers name a layer that is not in 'layers'");
  }
  const int input = input_it->second;
  const int output = output_it->second;
  for (size_t i = 0; i < nodes.size(); ++i) {
    bool is_input_layer = nodes[i].layer_class() == LayerClass::kInputLayer;
    if (is_input_layer != (static_cast<int>(i) == input)) {
      return LayerError(nodes[i], is_input_layer ? "is an input the model does not list"
                                                 : "is listed as the model's input");
    }
  }

  // Keras' order of model.layers (ops/function.py map_graph), which names the weights
  // groups: deepest first (depth = longest path to the output), ties broken by the
  // order of a depth-first walk back from the output that visits a layer's inputs in
  // call order. It is topological; the InputLayer comes first, the output last.
  constexpr int kUnseen = -1;
  std::vector<int> preorder(nodes.size(), kUnseen);
  std::vector<int> postorder;
  std::vector<bool> in_progress(nodes.size(), false);
  std::vector<std::pair<int, size_t>> stack = {{output, 0}};
  preorder[output] = 0;
  in_progress[output] = true;
  int visited = 1;
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (next == nodes[n].inputs.size()) {
      in_progress[n] = false;
      postorder.push_back(n);
      stack.pop_back();
      continue;
    }
    int p = nodes[n].inputs[next++];
    if (in_progress[p]) return LayerError(nodes[p], "is part of a cycle in the layer graph");
    if (preorder[p] != kUnseen) continue;
    preorder[p] = visited++;
    in_progress[p] = true;
    stack.emplace_back(p, 0);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (preorder[i] == kUnseen) return LayerError(nodes[i], "does not lead to the model's output");
  }
  std::vector<int> depth(nodes.size(), 0);
  for (auto it = postorder.rbegin(); it != postorder.rend(); ++it) {
    for (int p : nodes[*it].inputs) depth[p] = std::max(depth[p], depth[*it] + 1);
  }
  std::vector<int> order(nodes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return depth[a] != depth[b] ? depth[a] > depth[b] : preorder[a] < preorder[b];
  });

  std::vector<Node> sorted;
  std::vector<int> position(nodes.size());
  for (size_t k = 0; k < order.size(); ++k) position[order[k]] = static_cast<int>(k);
  for (int n : order) {
    Node node = std::move(nodes[n]);
    for (int& p : node.inputs) p = position[p];
    sorted.push_back(std::move(node));
  }
  return sorted;
}

}  // namespace cohort::keras::internal
