// Keras' shape rules on hand-written models (the [python] tests check the same rules
// against Keras' own layer.output.shape), and shape errors that name the layer.

#include "common/keras/shape_inference.h"

#include <catch2/catch.hpp>
#include <string>

#include "common/keras/model_config.h"
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

// The output shape of the last layer of Input(`shape`) -> `layer`.
std::string OutputOf(const std::vector<Json>& shape, const Json& layer) {
  absl::StatusOr<ModelIr> model =
      ParseModelConfig(SequentialModel({InputEntry("in", shape), layer}).dump());
  if (!model.ok()) return std::string(model.status().message());
  return ShapeToString(model->output().output_shape);
}

Json Pool(const std::string& cls, std::vector<int64_t> pool, Json strides,
          const std::string& padding) {
  return LayerEntry(cls, "pool", {{"pool_size", pool}, {"strides", strides}, {"padding", padding}});
}

Json Conv1D(int64_t filters, int64_t kernel, const std::string& padding, int64_t strides,
            int64_t dilation) {
  return LayerEntry("Conv1D", "conv",
                    {{"filters", filters},
                     {"kernel_size", {kernel}},
                     {"strides", {strides}},
                     {"padding", padding},
                     {"dilation_rate", {dilation}}});
}

TEST_CASE("convolution and pooling follow Keras' padding and stride rules", "[keras]") {
  CHECK(OutputOf({7, 7, 3}, Conv2DEntry("c", 5, 3)) == "(5, 5, 5)");
  CHECK(OutputOf({7, 7, 3}, Conv2DEntry("c", 5, 3, "valid", 2)) == "(3, 3, 5)");
  CHECK(OutputOf({7, 7, 3}, Conv2DEntry("c", 5, 3, "same", 2)) == "(4, 4, 5)");
  CHECK(OutputOf({8, 8, 3}, Conv2DEntry("c", 5, 3, "same", 2)) == "(4, 4, 5)");
  CHECK(OutputOf({7, 3}, Conv1D(2, 3, "valid", 1, 2)) == "(3, 2)");
  CHECK(OutputOf({7, 3}, Conv1D(2, 3, "causal", 1, 2)) == "(7, 2)");
  CHECK(OutputOf({7, 3}, Conv1D(2, 3, "causal", 3, 1)) == "(3, 2)");
  CHECK(OutputOf({nullptr, 3}, Conv1D(2, 3, "valid", 1, 1)) == "(None, 2)");

  CHECK(OutputOf({7, 7, 3}, Pool("MaxPooling2D", {2, 2}, nullptr, "valid")) == "(3, 3, 3)");
  CHECK(OutputOf({7, 7, 3}, Pool("MaxPooling2D", {2, 2}, nullptr, "same")) == "(4, 4, 3)");
  CHECK(OutputOf({7, 7, 3}, Pool("AveragePooling2D", {3, 2}, {1, 1}, "valid")) == "(5, 6, 3)");
  CHECK(OutputOf({9, 4}, Pool("MaxPooling1D", {4}, {2}, "valid")) == "(3, 4)");

  CHECK(OutputOf({5, 5, 3}, LayerEntry("GlobalAveragePooling2D", "g")) == "(3,)");
  CHECK(OutputOf({5, 5, 3}, LayerEntry("GlobalMaxPooling2D", "g", {{"keepdims", true}})) ==
        "(1, 1, 3)");
  CHECK(OutputOf({9, 4}, LayerEntry("GlobalAveragePooling1D", "g")) == "(4,)");

  CHECK(OutputOf({2, 2, 3}, Conv2DEntry("small", 1, 3)) ==
        "layer 'small' (Conv2D) gets an input of shape (2, 2, 3), smaller than its kernel (3, 3) "
        "with "
        "dilation (1, 1) and padding valid");
  CHECK(
      OutputOf({1, 4}, Pool("MaxPooling1D", {2}, nullptr, "valid")) ==
      "layer 'pool' (MaxPooling1D) gets an input of shape (1, 4), smaller than its pool (2,) with "
      "padding valid");
  CHECK(OutputOf({7, 3}, Conv2DEntry("flat", 1, 3)) ==
        "layer 'flat' (Conv2D) gets an input of shape (7, 3); Conv2D needs inputs of rank 3 (rows, "
        "cols, channels)");
  CHECK(OutputOf({7, 7, nullptr}, Conv2DEntry("c", 1, 3)) ==
        "layer 'c' (Conv2D) gets an input of shape (7, 7, None); channels must be known");
  Json grouped = Conv2DEntry("grouped", 4, 1);
  grouped["config"]["groups"] = 2;
  CHECK(OutputOf({7, 7, 3}, grouped) ==
        "layer 'grouped' (Conv2D) gets an input of shape (7, 7, 3); its 3 channels are not a "
        "multiple "
        "of groups (2)");
}

TEST_CASE("reshaping, dense and embedding shapes", "[keras]") {
  CHECK(OutputOf({4, 6}, LayerEntry("Flatten", "f")) == "(24,)");
  CHECK(OutputOf({}, LayerEntry("Flatten", "f")) == "(1,)");
  CHECK(OutputOf({nullptr, 6}, LayerEntry("Flatten", "f")) == "(None,)");
  CHECK(OutputOf({4, 6}, LayerEntry("Reshape", "r", {{"target_shape", {3, -1}}})) == "(3, 8)");
  CHECK(OutputOf({4, 6}, LayerEntry("Reshape", "r", {{"target_shape", {2, 12}}})) == "(2, 12)");
  CHECK(OutputOf({nullptr, 6}, LayerEntry("Reshape", "r", {{"target_shape", {-1, 3}}})) ==
        "(None, 3)");
  CHECK(OutputOf({4, 6}, LayerEntry("Reshape", "r", {{"target_shape", {5, -1}}})) ==
        "layer 'r' (Reshape) gets an input of shape (4, 6) of 24 elements, which cannot be "
        "reshaped to "
        "(5, -1)");
  CHECK(OutputOf({4, 6}, LayerEntry("Reshape", "r", {{"target_shape", {5, 5}}})) ==
        "layer 'r' (Reshape) gets an input of shape (4, 6) of 24 elements, which cannot be "
        "reshaped to "
        "(5, 5)");
  CHECK(OutputOf({4, 6}, DenseEntry("d", 3)) == "(4, 3)");
  CHECK(OutputOf({nullptr}, DenseEntry("d", 3)) ==
        "layer 'd' (Dense) gets an input of shape (None,); Dense needs a known last dimension");
  Json emb = LayerEntry("Embedding", "e", {{"input_dim", 10}, {"output_dim", 4}});
  CHECK(OutputOf({7}, emb) == "(7, 4)");
  CHECK(OutputOf({nullptr}, emb) == "(None, 4)");
  Json drop = LayerEntry("Dropout", "drop", {{"rate", 0.1}, {"noise_shape", {nullptr, 1}}});
  CHECK(OutputOf({3, 4}, drop) ==
        "layer 'drop' (Dropout) gets an input of shape (3, 4) but its noise_shape has 2 entries "
        "(batch "
        "included)");
}

TEST_CASE("axes resolve as Keras resolves them, and the batch axis is refused", "[keras]") {
  absl::StatusOr<ModelIr> model =
      ParseModelConfig(SequentialModel({InputEntry("in", {4, 5}),
                                        LayerEntry("BatchNormalization", "bn", {{"axis", 1}}),
                                        LayerEntry("LayerNormalization", "ln", {{"axis", {-1, 1}}}),
                                        LayerEntry("Softmax", "sm", {{"axis", -2}})})
                           .dump());
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  const Node& bn = model->nodes[1];
  CHECK(std::get<BatchNormalizationConfig>(bn.config).axis == 1);
  REQUIRE(bn.weights.size() == 4);
  CHECK(bn.weights[0].shape == Shape{4});
  CHECK(bn.weights[2].name == "moving_mean");
  CHECK_FALSE(bn.weights[2].trainable);
  const Node& ln = model->nodes[2];
  CHECK(std::get<LayerNormalizationConfig>(ln.config).axes == std::vector<int>{1, 2});
  CHECK(ln.weights[0].shape == Shape{4, 5});
  CHECK(std::get<SoftmaxConfig>(model->nodes[3].config).axis == 1);

  CHECK(OutputOf({4, 5}, LayerEntry("Softmax", "sm", {{"axis", 0}})) ==
        "layer 'sm' (Softmax) has axis 0, the batch axis, which Cohort does not support");
  CHECK(OutputOf({4, 5}, LayerEntry("BatchNormalization", "bn", {{"axis", 3}})) ==
        "layer 'bn' (BatchNormalization) gets an input of shape (4, 5) but its axis 3 is out of "
        "range");
  CHECK(
      OutputOf({4, nullptr}, LayerEntry("BatchNormalization", "bn")) ==
      "layer 'bn' (BatchNormalization) gets an input of shape (4, None) but its axis 2 must have a "
      "known size");
  CHECK(OutputOf({4, 5}, LayerEntry("LayerNormalization", "ln", {{"axis", {2, -1}}})) ==
        "layer 'ln' (LayerNormalization) lists axis 2 twice");
}

TEST_CASE("merge layers check their inputs' shapes", "[keras]") {
  auto merged = [](const std::vector<Json>& a, const std::vector<Json>& b, Json merge) {
    std::string name = merge["config"]["name"];
    return ParseModelConfig(
        FunctionalModel({Connect(InputEntry("x", {8, 8, 3}), {}),
                         Connect(Conv2DEntry("a", a[2], 3, "same"), {"x"}),
                         Connect(Conv2DEntry("b", b[2], 1, "valid", b[0] == 8 ? 1 : 8), {"x"}),
                         Connect(merge, {"a", "b"})},
                        "x", name)
            .dump());
  };
  absl::StatusOr<ModelIr> bad = merged({8, 8, 16}, {8, 8, 32}, LayerEntry("Add", "add"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "layer 'add' (Add) gets inputs of shapes (8, 8, 16) and (8, 8, 32), which cannot be added");
  absl::StatusOr<ModelIr> broadcast = merged({8, 8, 16}, {1, 1, 16}, LayerEntry("Add", "add"));
  INFO(broadcast.status().ToString());
  REQUIRE(broadcast.ok());
  CHECK(broadcast->output().output_shape == Shape{8, 8, 16});
  absl::StatusOr<ModelIr> concat = merged({8, 8, 16}, {8, 8, 32}, LayerEntry("Concatenate", "cat"));
  REQUIRE(concat.ok());
  CHECK(concat->output().output_shape == Shape{8, 8, 48});
  absl::StatusOr<ModelIr> concat_rows =
      merged({8, 8, 16}, {8, 8, 32}, LayerEntry("Concatenate", "cat", {{"axis", 1}}));
  REQUIRE_FALSE(concat_rows.ok());
  CHECK(
      concat_rows.status().message() ==
      "layer 'cat' (Concatenate) gets inputs of shapes (8, 8, 16) and (8, 8, 32), which cannot be "
      "concatenated on axis 1");
}

TEST_CASE("InferShapes fills in unknown dimensions from the data's shape", "[keras]") {
  absl::StatusOr<ModelIr> model = ParseModelConfig(
      SequentialModel({InputEntry("tokens", {nullptr}, "int32"),
                       LayerEntry("Embedding", "e", {{"input_dim", 50}, {"output_dim", 4}}),
                       Conv1D(3, 5, "valid", 1, 1), LayerEntry("Flatten", "f")})
          .dump());
  REQUIRE(model.ok());
  CHECK(model->output().output_shape == Shape{kUnknownDim});
  absl::StatusOr<std::vector<Shape>> shapes = InferShapes(*model, {20});
  REQUIRE(shapes.ok());
  CHECK(shapes->at(1) == Shape{20, 4});
  CHECK(shapes->at(2) == Shape{16, 3});
  CHECK(shapes->back() == Shape{48});
  absl::StatusOr<std::vector<Shape>> too_short = InferShapes(*model, {3});
  REQUIRE_FALSE(too_short.ok());
  CHECK_THAT(std::string(too_short.status().message()),
             Catch::StartsWith(
                 "layer 'conv' (Conv1D) gets an input of shape (3, 4), smaller than its kernel"));
  ModelLimits limits;
  limits.max_activation_elements = 1000;
  absl::StatusOr<std::vector<Shape>> too_long = InferShapes(*model, {300}, limits);
  REQUIRE_FALSE(too_long.ok());
  CHECK(too_long.status().message() ==
        "layer 'e' (Embedding) outputs (300, 4) per sample, more than the limit of 1000 elements");
}

}  // namespace
}  // namespace cohort::keras
