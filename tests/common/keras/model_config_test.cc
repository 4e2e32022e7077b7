// ParseModelConfig on hand-written configs: the IR of small models, and every kind of
// bad input refused with a message that names the layer and the field.

#include "common/keras/model_config.h"

#include <catch2/catch.hpp>
#include <string>

#include "tests/common/keras/config_builder.h"

namespace cohort::keras {
namespace {

using testing::Connect;
using testing::Conv2DEntry;
using testing::DenseEntry;
using testing::FunctionalModel;
using testing::InputEntry;
using testing::Json;
using testing::LayerEntry;
using testing::SequentialModel;

Json Mlp() {
  return SequentialModel(
      {InputEntry("in", {4}), DenseEntry("hidden", 8, "relu"), DenseEntry("out", 3, "softmax")});
}

// The message of the refusal of `config`, which must be InvalidArgument.
std::string Refusal(const std::string& config, const ModelLimits& limits = {}) {
  absl::StatusOr<ModelIr> model = ParseModelConfig(config, limits);
  INFO(config.substr(0, 400));
  REQUIRE_FALSE(model.ok());
  CHECK(model.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(model.status().message());
}
std::string Refusal(const Json& config, const ModelLimits& limits = {}) {
  return Refusal(config.dump(), limits);
}

TEST_CASE("a Sequential MLP becomes a chain of typed nodes", "[keras]") {
  absl::StatusOr<ModelIr> model = ParseModelConfig(Mlp().dump());
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  CHECK(model->name == "seq");
  CHECK(model->kind == ModelKind::kSequential);
  REQUIRE(model->nodes.size() == 3);
  CHECK(model->input().name == "in");
  CHECK(model->input_config().shape == Shape{4});
  CHECK(model->input_config().dtype == DType::kFloat32);
  CHECK(model->input().weights_group.empty());
  const Node& hidden = model->nodes[1];
  CHECK(hidden.layer_class() == LayerClass::kDense);
  CHECK(hidden.inputs == std::vector<int>{0});
  CHECK(hidden.output_shape == Shape{8});
  CHECK(std::get<DenseConfig>(hidden.config).activation == Activation::kRelu);
  REQUIRE(hidden.weights.size() == 2);
  CHECK(hidden.weights[0].name == "kernel");
  CHECK(hidden.weights[0].shape == Shape{4, 8});
  CHECK(hidden.weights[0].h5_path == "layers/dense/vars/0");
  CHECK(hidden.weights[0].initializer == Initializer::GlorotUniform());
  CHECK(hidden.weights[1].shape == Shape{8});
  CHECK(hidden.weights[1].h5_path == "layers/dense/vars/1");
  CHECK(hidden.weights[1].initializer == Initializer::Zeros());
  CHECK(model->output().name == "out");
  CHECK(model->output().weights_group == "layers/dense_1");
  CHECK(model->output().output_shape == Shape{3});
  CHECK(model->param_count == 4 * 8 + 8 + 8 * 3 + 3);
  CHECK(model->trainable_param_count == model->param_count);
  CHECK_FALSE(model->compile.has_value());
}

TEST_CASE("hand-written spellings Keras also accepts", "[keras]") {
  Json dense = DenseEntry("d", 2);
  dense["config"]["activation"] = {{"module", "builtins"},
                                   {"class_name", "function"},
                                   {"config", "swish"},
                                   {"registered_name", "function"}};
  dense["config"]["kernel_initializer"] = "he_normal";
  dense["config"]["bias_initializer"] = "zero";
  Json conv = Conv2DEntry("c", 2, 3);
  conv["config"]["kernel_size"] = 3;  // an int for every spatial axis
  conv["config"]["padding"] = "SAME";
  absl::StatusOr<ModelIr> model = ParseModelConfig(
      SequentialModel({InputEntry("in", {5, 5, 1}), conv, LayerEntry("Flatten", "f"), dense})
          .dump());
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  const auto& c = std::get<Conv2DConfig>(model->nodes[1].config);
  CHECK(c.kernel_size == std::array<int64_t, 2>{3, 3});
  CHECK(c.padding == Padding::kSame);
  CHECK(model->nodes[2].output_shape == Shape{50});
  const auto& d = std::get<DenseConfig>(model->nodes[3].config);
  CHECK(d.activation == Activation::kSilu);
  CHECK(d.kernel_initializer.scale == 2.0);
  CHECK(d.kernel_initializer.mode == Initializer::FanMode::kFanIn);
  CHECK(d.bias_initializer == Initializer::Zeros());

  // A Sequential model built with model.build() and no keras.Input.
  Json built = SequentialModel({DenseEntry("d", 2)});
  built["config"]["build_input_shape"] = {nullptr, 7};
  absl::StatusOr<ModelIr> from_build = ParseModelConfig(built.dump());
  REQUIRE(from_build.ok());
  CHECK(from_build->input_config().shape == Shape{7});
  CHECK(from_build->nodes[1].weights[0].shape == Shape{7, 2});
}

TEST_CASE("unsupported layers and Keras 2 configs are refused by name", "[keras]") {
  Json lstm = LayerEntry("LSTM", "lstm_1", {{"units", 4}});
  CHECK_THAT(Refusal(SequentialModel({InputEntry("in", {5, 3}), lstm})),
             Catch::StartsWith("layer 'lstm_1' has class LSTM, which Cohort does not support; "
                               "supported: InputLayer, Dense, Conv1D, Conv2D, MaxPooling1D, "
                               "MaxPooling2D, AveragePooling2D, GlobalAveragePooling1D, "
                               "GlobalAveragePooling2D, GlobalMaxPooling2D, Flatten, Reshape, "
                               "Dropout, BatchNormalization, LayerNormalization, Activation, "
                               "ReLU, Softmax, Embedding, Add, Concatenate"));

  Json custom = DenseEntry("mine", 3);
  custom["registered_name"] = "my_package>MyDense";
  CHECK_THAT(Refusal(SequentialModel({InputEntry("in", {4}), custom})),
             Catch::Contains("layer 'mine' (Dense) is the custom class my_package>MyDense"));

  // tf.keras 2.x: batch_input_shape and nested-list inbound_nodes.
  Json keras2 = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "sequential"},
        {"layers",
         {{{"class_name", "InputLayer"},
           {"config",
            {{"batch_input_shape", {nullptr, 4}}, {"dtype", "float32"}, {"name", "dense_input"}}}},
          {{"class_name", "Dense"},
           {"config", {{"name", "dense"}, {"units", 3}, {"dtype", "float32"}}}}}}}},
      {"keras_version", "2.12.0"},
      {"backend", "tensorflow"}};
  CHECK_THAT(Refusal(keras2), Catch::StartsWith("this is a Keras 2 (tf.keras) model config "
                                                "(keras_version 2.12.0)"));
  keras2.erase("keras_version");
  keras2.erase("backend");
  CHECK_THAT(Refusal(keras2), Catch::StartsWith("this is a Keras 2 (tf.keras) model config "
                                                "(batch_input_shape)"));
  Json functional2 = {{"class_name", "Functional"},
                      {"config",
                       {{"name", "model"},
                        {"layers",
                         {{{"class_name", "InputLayer"},
                           {"name", "input_1"},
                           {"config", {{"batch_shape", {nullptr, 4}}, {"name", "input_1"}}},
                           {"inbound_nodes", Json::array()}},
                          {{"class_name", "Dense"},
                           {"name", "dense"},
                           {"config", {{"name", "dense"}, {"units", 3}}},
                           {"inbound_nodes", {{{"input_1", 0, 0, Json::object()}}}}}}},
                        {"input_layers", {{"input_1", 0, 0}}},
                        {"output_layers", {{"dense", 0, 0}}}}}};
  CHECK_THAT(Refusal(functional2), Catch::Contains("Keras 2 (tf.keras) model config "
                                                   "(list-style inbound_nodes)"));

  Json subclassed = {{"class_name", "MyModel"}, {"config", Json::object()}};
  CHECK_THAT(Refusal(subclassed), Catch::Contains("Cohort supports Sequential and Functional"));
}

TEST_CASE("text that is not a whole config is refused at every length", "[keras]") {
  Json model = FunctionalModel(
      {Connect(InputEntry("x", {8, 8, 3}), {}), Connect(Conv2DEntry("conv", 4, 3, "same"), {"x"}),
       Connect(Conv2DEntry("conv_b", 4, 1), {"x"}),
       Connect(LayerEntry("Add", "add"), {"conv", "conv_b"}),
       Connect(LayerEntry("Flatten", "flat"), {"add"}), Connect(DenseEntry("head", 2), {"flat"})},
      "x", "head");
  std::string text = model.dump();
  REQUIRE(ParseModelConfig(text).ok());
  for (size_t n = 0; n < text.size(); ++n) {
    absl::StatusOr<ModelIr> cut = ParseModelConfig(text.substr(0, n));
    INFO("first " << n << " bytes");
    REQUIRE_FALSE(cut.ok());
    CHECK(cut.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(cut.status().message()),
               Catch::StartsWith("the model config is not valid JSON"));
  }
  CHECK_THAT(Refusal(std::string("[1, 2]")),
             Catch::Contains("must be a JSON object, got a list of 2"));
  CHECK_THAT(Refusal(std::string("{\"config\": {}}")),
             Catch::Contains("field 'class_name' is missing"));
  CHECK_THAT(Refusal(std::string("\xff\xfe{}", 4)),
             Catch::StartsWith("the model config is not valid JSON"));
}

TEST_CASE("fields of the wrong type are refused naming the layer and field", "[keras]") {
  struct Case {
    const char* field;
    Json value;
    const char* message;
  };
  const Case cases[] = {
      {"units", "64",
       "layer 'dense' (Dense): field 'units' must be an integer, got the string '64'"},
      {"units", 3.5, "field 'units' must be an integer, got the number 3.5"},
      {"units", 0, "layer 'dense' (Dense): units must be at least 1, got 0"},
      {"units", Json::parse("1180591620717411303424"), "field 'units' must be an integer"},
      {"units", nullptr, "layer 'dense' (Dense): field 'units' is missing"},
      {"trainable", 1, "field 'trainable' must be true or false, got the integer 1"},
      {"use_bias", "yes", "field 'use_bias' must be true or false"},
      {"activation", 3, "field 'activation' must be an activation name, got the integer 3"},
      {"activation", "mish",
       "activation 'mish' is not supported; supported: linear, relu, sigmoid, "
       "tanh, softmax, gelu, silu, swish, elu, selu, softplus, leaky_relu"},
      {"activation",
       {{"class_name", "LeakyReLU"}, {"config", Json::object()}},
       "activation is a LeakyReLU object, which Cohort does not support"},
      {"kernel_initializer",
       {{"class_name", 5}},
       "field 'kernel_initializer' must be a name or a serialized object with a class_name"},
      {"kernel_initializer", "identity", "kernel_initializer identity is not supported"},
      {"kernel_initializer",
       {{"class_name", "VarianceScaling"}, {"config", {{"mode", "fan_sideways"}}}},
       "mode 'fan_sideways' is not one of fan_in, fan_out, fan_avg"},
      {"kernel_initializer",
       {{"class_name", "GlorotUniform"}, {"config", {{"seed", "x"}}}},
       "field 'seed' must be an integer"},
      {"dtype", 32, "field 'dtype' must be a dtype policy, got the integer 32"},
      {"dtype",
       {{"class_name", "QuantizedDTypePolicy"}},
       "dtype policy QuantizedDTypePolicy is not "
       "supported"},
      {"bias_constraint",
       {{"class_name", "NonNeg"}},
       "bias_constraint is not supported (constraints)"},
      {"lora_rank", 4, "lora_rank is not supported (LoRA)"},
  };
  for (const Case& c : cases) {
    INFO(c.field << " = " << c.value.dump());
    Json dense = DenseEntry("dense", 3);
    if (c.value.is_null()) {
      dense["config"].erase(c.field);
    } else {
      dense["config"][c.field] = c.value;
    }
    CHECK_THAT(Refusal(SequentialModel({InputEntry("in", {4}), dense})),
               Catch::Contains(c.message));
  }

  Json conv = Conv2DEntry("conv", 2, 3);
  conv["config"]["kernel_size"] = "3";
  CHECK_THAT(
      Refusal(SequentialModel({InputEntry("in", {8, 8, 1}), conv})),
      Catch::Contains("layer 'conv' (Conv2D): field 'kernel_size' must be a list of integers, "
                      "got the string '3'"));
  conv["config"]["kernel_size"] = {3, 3, 3};
  CHECK_THAT(Refusal(SequentialModel({InputEntry("in", {8, 8, 1}), conv})),
             Catch::Contains("kernel_size must have 2 entries, got 3"));
  conv = Conv2DEntry("conv", 2, 3);
  conv["config"]["padding"] = "full";
  CHECK_THAT(Refusal(SequentialModel({InputEntry("in", {8, 8, 1}), conv})),
             Catch::Contains("padding 'full' is not supported; supported: valid, same"));
  conv = Conv2DEntry("conv", 3, 3);
  conv["config"]["groups"] = 2;
  CHECK_THAT(Refusal(SequentialModel({InputEntry("in", {8, 8, 4}), conv})),
             Catch::Contains("filters (3) must be a multiple of groups (2)"));

  Json input = InputEntry("in", {4});
  input["config"]["batch_shape"] = Json::object();
  CHECK_THAT(Refusal(SequentialModel({input, DenseEntry("d", 2)})),
             Catch::Contains(
                 "layer 'in' (InputLayer): field 'batch_shape' must be a list, got an object"));
  input["config"]["batch_shape"] = {nullptr, -3};
  CHECK_THAT(
      Refusal(SequentialModel({input, DenseEntry("d", 2)})),
      Catch::Contains("batch_shape entries must be positive integers or null, got the integer -3"));
  input = InputEntry("in", {4}, "complex64");
  CHECK_THAT(Refusal(SequentialModel({input, DenseEntry("d", 2)})),
             Catch::Contains("dtype 'complex64' is not a known dtype"));

  Json model = Mlp();
  model["config"]["layers"] = "all of them";
  CHECK_THAT(Refusal(model),
             Catch::Contains("the Sequential model: field 'layers' must be a list"));
  model = Mlp();
  model["config"]["layers"][1]["config"] = {1, 2};
  CHECK_THAT(Refusal(model), Catch::Contains("layer #1: (Dense) has no config object"));
  model = Mlp();
  model["config"]["layers"][1] = 7;
  CHECK_THAT(Refusal(model), Catch::Contains("layer #1 is the integer 7, not an object"));
}

TEST_CASE("unsupported options are refused naming the option", "[keras]") {
  struct Case {
    Json entry;
    const char* field;
    Json value;
    const char* message;
  };
  Json bn = LayerEntry("BatchNormalization", "bn");
  Json ln = LayerEntry("LayerNormalization", "ln");
  Json emb = LayerEntry("Embedding", "emb", {{"input_dim", 10}, {"output_dim", 2}});
  Json drop = LayerEntry("Dropout", "drop", {{"rate", 0.5}});
  const Case cases[] = {
      {bn, "renorm", true, "layer 'bn' (BatchNormalization): renorm=True is not supported"},
      {bn, "synchronized", true, "synchronized=True is not supported"},
      {bn, "axis", {1, 2}, "axis must be a single integer"},
      {bn, "epsilon", 0, "epsilon must be positive"},
      {ln, "rms_scaling", true,
       "layer 'ln' (LayerNormalization): rms_scaling=True is not supported"},
      {emb, "mask_zero", true, "layer 'emb' (Embedding): mask_zero=True is not supported"},
      {emb,
       "embeddings_regularizer",
       {{"class_name", "L2"}},
       "embeddings_regularizer is not supported"},
      {drop, "rate", 1.0, "layer 'drop' (Dropout): rate must be in [0, 1), got 1"},
      {drop, "noise_shape", {nullptr, 0}, "noise_shape entries must be positive integers or null"},
      {LayerEntry("Flatten", "flat"), "data_format", "channels_first",
       "layer 'flat' (Flatten): data_format channels_first is not supported"},
      {LayerEntry("Reshape", "rs"), "target_shape", {-1, -1}, "target_shape has more than one -1"},
      {LayerEntry("ReLU", "relu"), "negative_slope", -1, "negative_slope must not be negative"},
      {LayerEntry("Softmax", "sm"), "axis", Json::array({-1}),
       "layer 'sm' (Softmax): axis must be a single integer"},
      {LayerEntry("Dense", "d", {{"units", 2}}),
       "activity_regularizer",
       {{"class_name", "L1"}},
       "layer 'd' (Dense): activity_regularizer is not supported"},
  };
  for (const Case& c : cases) {
    Json entry = c.entry;
    entry["config"][c.field] = c.value;
    INFO(entry.dump());
    std::vector<Json> shape =
        c.entry["class_name"] == "Embedding" ? std::vector<Json>{4} : std::vector<Json>{4, 4};
    CHECK_THAT(Refusal(SequentialModel({InputEntry("in", shape), entry})),
               Catch::Contains(c.message));
  }
  Json maxpool = LayerEntry("MaxPooling1D", "mp", {{"pool_size", {2}}, {"padding", "causal"}});
  CHECK_THAT(Refusal(SequentialModel({InputEntry("in", {8, 2}), maxpool})),
             Catch::Contains("layer 'mp' (MaxPooling1D): padding 'causal' is not supported"));
}

TEST_CASE("graphs Cohort cannot run are refused", "[keras]") {
  auto functional = [](std::vector<Json> layers, const std::string& out) {
    return FunctionalModel(std::move(layers), "x", out);
  };
  Json x = Connect(InputEntry("x", {4}), {});

  CHECK_THAT(
      Refusal(functional({x, Connect(DenseEntry("d", 2), {"ghost"})}, "d")),
      Catch::Contains("layer 'd' (Dense) takes the output of 'ghost', which is not a layer"));
  CHECK_THAT(
      Refusal(functional({x, Connect(DenseEntry("a", 4), {"b"}), Connect(DenseEntry("b", 4), {"a"}),
                          Connect(LayerEntry("Add", "s"), {"x", "b"})},
                         "s")),
      Catch::Contains("is part of a cycle in the layer graph"));
  CHECK_THAT(
      Refusal(functional(
          {x, Connect(DenseEntry("d", 2), {"x"}), Connect(DenseEntry("spare", 2), {"x"})}, "d")),
      Catch::Contains("layer 'spare' (Dense) does not lead to the model's output"));
  CHECK_THAT(Refusal(functional(
                 {x, Connect(DenseEntry("d", 2), {"x"}), Connect(DenseEntry("d", 2), {"d"})}, "d")),
             Catch::Contains("two layers are named 'd'"));
  CHECK_THAT(Refusal(functional({x, Connect(DenseEntry("d", 2), {})}, "d")),
             Catch::Contains("layer 'd' (Dense) is not connected to anything"));
  Json masked = Connect(DenseEntry("d", 2), {"x"});
  masked["inbound_nodes"][0]["kwargs"] = {{"mask", true}, {"training", true}};
  CHECK_THAT(Refusal(functional({x, masked}, "d")),
             Catch::Contains("layer 'd' (Dense) is called with the keyword argument 'mask'"));
  Json extra = Connect(DenseEntry("d", 2), {"x"});
  extra["inbound_nodes"][0]["args"].push_back(3);
  CHECK_THAT(
      Refusal(functional({x, extra}, "d")),
      Catch::Contains("layer 'd' (Dense) must be called on exactly one positional argument"));
  Json second_output = Connect(DenseEntry("d", 2), {"x"});
  second_output["inbound_nodes"][0]["args"][0]["config"]["keras_history"] = {"x", 0, 1};
  CHECK_THAT(Refusal(functional({x, second_output}, "d")),
             Catch::Contains("takes output 1 of layer 'x', which has one output"));
  Json other_input = Connect(InputEntry("y", {4}), {});
  CHECK_THAT(
      Refusal(functional({x, other_input, Connect(LayerEntry("Add", "s"), {"x", "y"})}, "s")),
      Catch::Contains("layer 'y' (InputLayer) is an input the model does not list"));
  CHECK_THAT(Refusal(functional({x}, "x")),
             Catch::Contains("the model has no layers besides its input"));
  Json nested = Connect(LayerEntry("Functional", "inner"), {"x"});
  CHECK_THAT(Refusal(functional({x, nested}, "inner")),
             Catch::Contains("layer 'inner' (Functional) is a nested model"));

  CHECK_THAT(Refusal(SequentialModel({DenseEntry("d", 2)})),
             Catch::Contains("the Sequential model has no input shape: it was never built"));
  CHECK_THAT(
      Refusal(SequentialModel({InputEntry("a", {4}), DenseEntry("d", 2), InputEntry("b", {2})})),
      Catch::Contains("layer 'b' (InputLayer) is not the first layer of the Sequential model"));
}

TEST_CASE("configs past the limits are refused before anything is allocated", "[keras]") {
  // A 10^12-element Dense layer.
  CHECK_THAT(Refusal(SequentialModel({InputEntry("in", {1}), DenseEntry("huge", 1000000000000)})),
             Catch::Contains("layer 'huge' (Dense) outputs (1000000000000,) per sample, more than "
                             "the limit of 268435456 elements"));
  CHECK_THAT(
      Refusal(SequentialModel({InputEntry("in", {1000000}), DenseEntry("wide", 1000000)})),
      Catch::Contains("layer 'wide' (Dense) has more parameters than the limit of 2147483648 "
                      "(its kernel is (1000000, 1000000))"));
  CHECK_THAT(
      Refusal(SequentialModel({InputEntry("in", {100000, 100000, 3}), Conv2DEntry("c", 1, 1)})),
      Catch::Contains("layer 'in' (InputLayer) outputs (100000, 100000, 3) per sample"));
  // Sizes whose products overflow int64 are refused, not wrapped.
  ModelLimits no_activation_limit;
  no_activation_limit.max_activation_elements = INT64_MAX;
  no_activation_limit.max_parameters = INT64_MAX;
  CHECK_THAT(Refusal(SequentialModel(
                         {InputEntry("in", {int64_t{1} << 40}), DenseEntry("o", int64_t{1} << 40)}),
                     no_activation_limit),
             Catch::Contains("layer 'o' (Dense) has more parameters than the limit"));
  CHECK_THAT(Refusal(SequentialModel({InputEntry("in", {int64_t{1} << 40, int64_t{1} << 40}),
                                      LayerEntry("Flatten", "f")}),
                     no_activation_limit),
             Catch::Contains("layer 'in' (InputLayer) outputs (1099511627776, 1099511627776) per "
                             "sample, more than the limit of 9223372036854775807 elements"));

  ModelLimits small;
  small.max_parameters = 4 * 8 + 8 + 8 * 3 + 3;
  CHECK(ParseModelConfig(Mlp().dump(), small).ok());
  small.max_parameters -= 1;
  CHECK_THAT(Refusal(Mlp(), small),
             Catch::Contains(
                 "the model has more parameters than the limit of 66 (reached at layer 'out')"));
  small = ModelLimits();
  small.max_layers = 2;
  CHECK_THAT(Refusal(Mlp(), small), Catch::Contains("has 3 layers, more than the limit of 2"));
}

}  // namespace
}  // namespace cohort::keras
