#include "tests/common/keras/config_builder.h"

namespace cohort::keras::testing {
namespace {

Json Initializer(const std::string& class_name) {
  return {{"module", "keras.initializers"},
          {"class_name", class_name},
          {"config", Json::object()},
          {"registered_name", nullptr}};
}

Json Tensor(const std::string& producer) {
  return {
      {"class_name", "__keras_tensor__"},
      {"config", {{"shape", nullptr}, {"dtype", "float32"}, {"keras_history", {producer, 0, 0}}}}};
}

}  // namespace

Json LayerEntry(const std::string& class_name, const std::string& name, Json fields) {
  Json config = {{"name", name},
                 {"trainable", true},
                 {"dtype",
                  {{"module", "keras"},
                   {"class_name", "DTypePolicy"},
                   {"config", {{"name", "float32"}}},
                   {"registered_name", nullptr}}}};
  for (auto& [key, value] : fields.items()) config[key] = value;
  return {{"module", "keras.layers"},
          {"class_name", class_name},
          {"config", config},
          {"registered_name", nullptr}};
}

Json InputEntry(const std::string& name, const std::vector<Json>& shape, const std::string& dtype) {
  Json batch_shape = Json::array({nullptr});
  for (const Json& d : shape) batch_shape.push_back(d);
  return {{"module", "keras.layers"},
          {"class_name", "InputLayer"},
          {"config",
           {{"batch_shape", batch_shape},
            {"dtype", dtype},
            {"sparse", false},
            {"ragged", false},
            {"name", name},
            {"optional", false}}},
          {"registered_name", nullptr}};
}

Json Connect(Json entry, const std::vector<std::string>& inputs) {
  entry["name"] = entry["config"]["name"];
  if (inputs.empty()) {
    entry["inbound_nodes"] = Json::array();
    return entry;
  }
  std::string cls = entry["class_name"];
  Json args;
  if (cls == "Add" || cls == "Concatenate") {
    Json list = Json::array();
    for (const std::string& i : inputs) list.push_back(Tensor(i));
    args = Json::array({list});
  } else {
    args = Json::array({Tensor(inputs.at(0))});
  }
  entry["inbound_nodes"] = Json::array({{{"args", args}, {"kwargs", Json::object()}}});
  return entry;
}

Json SequentialModel(std::vector<Json> layers, const std::string& name) {
  return {{"module", "keras"},
          {"class_name", "Sequential"},
          {"config", {{"name", name}, {"trainable", true}, {"layers", layers}}},
          {"registered_name", nullptr}};
}

Json FunctionalModel(std::vector<Json> layers, const std::string& input, const std::string& output,
                     const std::string& name) {
  return {{"module", "keras.src.models.functional"},
          {"class_name", "Functional"},
          {"config",
           {{"name", name},
            {"trainable", true},
            {"layers", layers},
            {"input_layers", {input, 0, 0}},
            {"output_layers", {output, 0, 0}}}},
          {"registered_name", "Functional"}};
}

Json DenseEntry(const std::string& name, int64_t units, const std::string& activation) {
  return LayerEntry("Dense", name,
                    {{"units", units},
                     {"activation", activation},
                     {"use_bias", true},
                     {"kernel_initializer", Initializer("GlorotUniform")},
                     {"bias_initializer", Initializer("Zeros")},
                     {"kernel_regularizer", nullptr},
                     {"bias_regularizer", nullptr},
                     {"kernel_constraint", nullptr},
                     {"bias_constraint", nullptr},
                     {"quantization_config", nullptr}});
}

Json Conv2DEntry(const std::string& name, int64_t filters, int64_t kernel,
                 const std::string& padding, int64_t strides) {
  return LayerEntry("Conv2D", name,
                    {{"filters", filters},
                     {"kernel_size", {kernel, kernel}},
                     {"strides", {strides, strides}},
                     {"padding", padding},
                     {"data_format", "channels_last"},
                     {"dilation_rate", {1, 1}},
                     {"groups", 1},
                     {"activation", "linear"},
                     {"use_bias", true},
                     {"kernel_initializer", Initializer("GlorotUniform")},
                     {"bias_initializer", Initializer("Zeros")}});
}

}  // namespace cohort::keras::testing
