// Models real Keras builds and saves: the IR must say what Keras says about them —
// layer order, classes and flags, every output shape (layer.output.shape), parameter
// counts (count_params), and the weights layout h5py finds in model.weights.h5.

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>

#include "common/keras/model_config.h"
#include "tests/common/keras/keras_fixtures.h"

namespace cohort::keras {
namespace {

using nlohmann::json;
using testing::KerasModels;
using testing::ReadFixture;
using testing::ReadJsonFixture;

Shape ToShape(const json& dims) {
  Shape out;
  for (const json& d : dims) out.push_back(d.is_null() ? kUnknownDim : d.get<int64_t>());
  return out;
}

void CheckAgainstKeras(const std::string& dir, const std::string& name) {
  INFO("model " << name);
  json expected = ReadJsonFixture(dir, name + ".expected.json");
  absl::StatusOr<ModelIr> parsed = ParseModelConfig(ReadFixture(dir, name + ".config.json"));
  INFO(parsed.status().ToString());
  REQUIRE(parsed.ok());
  const ModelIr& model = *parsed;

  CHECK(model.name == expected["name"]);
  CHECK((model.kind == ModelKind::kSequential) == (expected["kind"] == "Sequential"));
  CHECK(model.param_count == expected["count_params"].get<int64_t>());
  CHECK(model.trainable_param_count == expected["trainable_params"].get<int64_t>());

  const json& layers = expected["layers"];
  REQUIRE(model.nodes.size() == layers.size());
  const json& groups = expected["h5_groups"];
  const json& datasets = expected["h5_datasets"];
  std::set<std::string> groups_seen;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Node& node = model.nodes[i];
    const json& layer = layers[i];
    INFO("layer " << i << " " << layer["name"]);
    CHECK(node.name == layer["name"]);
    CHECK(LayerClassName(node.layer_class()) == layer["class"].get<std::string>());
    CHECK(ShapeToString(node.output_shape) == ShapeToString(ToShape(layer["output_shape"])));
    CHECK(node.param_count == layer["count_params"].get<int64_t>());

    const json& weights = layer["weights"];
    REQUIRE(node.weights.size() == weights.size());
    for (size_t j = 0; j < weights.size(); ++j) {
      INFO("weight " << j << " " << weights[j]["name"]);
      CHECK(node.weights[j].name == weights[j]["name"]);
      CHECK(node.weights[j].shape == ToShape(weights[j]["shape"]));
      CHECK(node.weights[j].trainable == weights[j]["trainable"].get<bool>());
      // The dataset Keras wrote for this variable has this path and shape.
      REQUIRE(datasets.contains(node.weights[j].h5_path));
      CHECK(ToShape(datasets[node.weights[j].h5_path]) == node.weights[j].shape);
    }

    if (!layer["in_model_layers"].get<bool>()) {
      CHECK(node.weights_group.empty());  // a Sequential model's InputLayer
      continue;
    }
    // The vars group Keras wrote for this layer: named after its class, tagged with
    // the layer's name, holding exactly its variables.
    std::string vars = node.weights_group + "/vars";
    REQUIRE(groups.contains(vars));
    CHECK(groups[vars]["name"] == node.name);
    for (size_t j = node.weights.size(); j < node.weights.size() + 2; ++j) {
      CHECK_FALSE(datasets.contains(vars + "/" + std::to_string(j)));
    }
    groups_seen.insert(vars);
  }
  // Every layer group in the file belongs to a node.
  for (const auto& [path, attrs] : groups.items()) {
    if (path.rfind("layers/", 0) == 0 && path.size() > 5 &&
        path.compare(path.size() - 5, 5, "/vars") == 0) {
      CHECK(groups_seen.count(path) == 1);
    }
  }
  CHECK(groups["vars"]["name"] == model.name);

  // config.json and model.to_json() agree up to shared_object_id, and parse alike.
  CHECK(expected["to_json_matches"].get<bool>());
  absl::StatusOr<ModelIr> from_to_json = ParseModelConfig(ReadFixture(dir, name + ".to_json.json"));
  REQUIRE(from_to_json.ok());
  CHECK(from_to_json->param_count == model.param_count);
  CHECK(from_to_json->nodes.size() == model.nodes.size());
}

const Node& NodeNamed(const ModelIr& model, const std::string& name) {
  for (const Node& node : model.nodes) {
    if (node.name == name) return node;
  }
  FAIL("no node " << name);
  throw;
}

TEST_CASE("models Keras writes parse to what Keras says about them", "[keras][python]") {
  const std::string& dir = KerasModels("good");
  for (const char* name :
       {"mlp", "cnn", "resnet", "text", "vartext", "shapes", "shuffled", "built"}) {
    CheckAgainstKeras(dir, name);
  }

  SECTION("typed configs hold the Keras settings") {
    ModelIr cnn = *ParseModelConfig(ReadFixture(dir, "cnn.config.json"));
    const auto& conv = std::get<Conv2DConfig>(cnn.nodes[1].config);
    CHECK(conv.filters == 4);
    CHECK(conv.strides == std::array<int64_t, 2>{2, 2});
    CHECK(conv.activation == Activation::kRelu);
    CHECK(conv.padding == Padding::kValid);
    const auto& conv2 = std::get<Conv2DConfig>(cnn.nodes[3].config);
    CHECK(conv2.kernel_size == std::array<int64_t, 2>{3, 2});
    CHECK(conv2.dilation_rate == std::array<int64_t, 2>{2, 1});
    CHECK(conv2.padding == Padding::kSame);
    CHECK_FALSE(conv2.use_bias);
    CHECK(conv2.kernel_initializer.kind == Initializer::Kind::kVarianceScaling);
    CHECK(conv2.kernel_initializer.scale == 2.0);
    CHECK(conv2.kernel_initializer.mode == Initializer::FanMode::kFanIn);
    CHECK(conv2.kernel_initializer.distribution == Initializer::Distribution::kUniform);
    const auto& pool = std::get<AveragePooling2DConfig>(cnn.nodes[4].config);
    CHECK(pool.pool_size == std::array<int64_t, 2>{2, 3});
    CHECK(pool.strides == std::array<int64_t, 2>{1, 1});
    const auto& bn = std::get<BatchNormalizationConfig>(cnn.nodes[5].config);
    CHECK(bn.axis == 3);
    CHECK(bn.momentum == 0.9);
    CHECK(bn.epsilon == 1e-5);
    CHECK_FALSE(bn.scale);
    CHECK(bn.center);
    CHECK(std::get<DenseConfig>(cnn.nodes[7].config).activation == Activation::kGelu);
    CHECK(std::get<DenseConfig>(cnn.nodes[7].config).kernel_initializer.distribution ==
          Initializer::Distribution::kTruncatedNormal);
    CHECK(std::get<LayerNormalizationConfig>(cnn.nodes[8].config).axes == std::vector<int>{1});
    CHECK(std::get<ActivationConfig>(cnn.nodes[9].config).activation == Activation::kTanh);
    const Initializer& vs = std::get<DenseConfig>(cnn.nodes[10].config).kernel_initializer;
    CHECK(vs.mode == Initializer::FanMode::kFanOut);
    CHECK(vs.distribution == Initializer::Distribution::kUntruncatedNormal);
    CHECK(vs.seed == 7);
    CHECK(std::get<SoftmaxConfig>(cnn.nodes[11].config).axis == 1);

    ModelIr text = *ParseModelConfig(ReadFixture(dir, "text.config.json"));
    CHECK(text.input_config().dtype == DType::kInt32);
    const auto& emb = std::get<EmbeddingConfig>(NodeNamed(text, "emb").config);
    CHECK(emb.input_dim == 100);
    CHECK(emb.embeddings_initializer.kind == Initializer::Kind::kRandomUniform);
    const auto& causal = std::get<Conv1DConfig>(NodeNamed(text, "causal").config);
    CHECK(causal.padding == Padding::kCausal);
    CHECK(causal.activation == Activation::kElu);
    const auto& grouped = std::get<Conv1DConfig>(NodeNamed(text, "grouped").config);
    CHECK(grouped.groups == 2);
    CHECK(grouped.activation == Activation::kSelu);
    const Node& concat = NodeNamed(text, "concat");
    CHECK(std::get<ConcatenateConfig>(concat.config).axis == 1);
    REQUIRE(concat.inputs.size() == 2);
    CHECK(text.nodes[concat.inputs[0]].name == "soft");
    CHECK(text.nodes[concat.inputs[1]].name == "pool_b");
    const auto& dropout = std::get<DropoutConfig>(NodeNamed(text, "drop").config);
    CHECK(dropout.rate == 0.5);
    CHECK(dropout.seed == 3);
    CHECK(dropout.noise_shape == std::vector<int64_t>{kUnknownDim, 4});
    const auto& leaky = std::get<DenseConfig>(NodeNamed(text, "leaky").config);
    CHECK(leaky.activation == Activation::kLeakyRelu);
    CHECK(leaky.bias_initializer.kind == Initializer::Kind::kConstant);
    CHECK(leaky.bias_initializer.value == 0.5);
    CHECK(leaky.kernel_initializer.kind == Initializer::Kind::kRandomNormal);
    CHECK(leaky.kernel_initializer.stddev == 0.1);
    const auto& swish = std::get<DenseConfig>(NodeNamed(text, "swish").config);
    CHECK(swish.activation == Activation::kSilu);
    CHECK(swish.kernel_initializer.kind == Initializer::Kind::kTruncatedNormal);
    CHECK(swish.bias_initializer.kind == Initializer::Kind::kOnes);
    CHECK(std::get<DenseConfig>(NodeNamed(text, "sig").config).activation == Activation::kSigmoid);
    const auto& relu = std::get<ReLUConfig>(NodeNamed(text, "clip").config);
    CHECK(relu.max_value == 6.0);
    CHECK(relu.negative_slope == Approx(0.1));
    CHECK(relu.threshold == 0.5);
    CHECK(std::get<DenseConfig>(NodeNamed(text, "soft").config).activation ==
          Activation::kSoftplus);

    ModelIr resnet = *ParseModelConfig(ReadFixture(dir, "resnet.config.json"));
    CHECK_FALSE(NodeNamed(resnet, "bn1").trainable);
    CHECK(NodeNamed(resnet, "c1").weights_group == "layers/conv2d");
    CHECK(NodeNamed(resnet, "c2").weights_group == "layers/conv2d_1");
    CHECK(resnet.input().weights_group == "layers/input_layer");
    const Node& add = NodeNamed(resnet, "add");
    REQUIRE(add.inputs.size() == 2);
    CHECK(resnet.nodes[add.inputs[0]].name == "relu");
    CHECK(resnet.nodes[add.inputs[1]].name == "bn2");
    CHECK(resnet.output().name == "head");

    ModelIr shapes = *ParseModelConfig(ReadFixture(dir, "shapes.config.json"));
    CHECK(std::get<LayerNormalizationConfig>(shapes.nodes[2].config).axes ==
          std::vector<int>{1, 2});
    CHECK(std::get<SoftmaxConfig>(shapes.nodes[3].config).axis == 1);
    CHECK(std::get<GlobalMaxPooling2DConfig>(shapes.nodes[5].config).keepdims);
  }
}

}  // namespace
}  // namespace cohort::keras
