#include <catch2/catch.hpp>

#include "worker/trainer/weights/keras_weights.h"

namespace cohort::trainer {
namespace {

TEST_CASE("KerasSnakeCase matches keras.src.utils.naming.to_snake_case") {
  // Expected values printed by Keras 3.15's to_snake_case.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"Dense", "dense"},
      {"Conv2D", "conv2d"},
      {"Conv1D", "conv1d"},
      {"BatchNormalization", "batch_normalization"},
      {"InputLayer", "input_layer"},
      {"GlobalAveragePooling1D", "global_average_pooling1d"},
      {"LSTM", "lstm"},
      {"PReLU", "p_re_lu"},
      {"ReLU", "re_lu"},
      {"MultiHeadAttention", "multi_head_attention"},
      {"Conv2DTranspose", "conv2d_transpose"},
      {"RMSprop", "rm_sprop"},
      {"SGD", "sgd"},
      {"UpSampling2D", "up_sampling2d"},
      {"My.Layer-2", "my_layer2"},
  };
  for (const auto& [class_name, snake] : cases) {
    INFO(class_name);
    CHECK(KerasSnakeCase(class_name) == snake);
  }
}

TEST_CASE("KerasLayerGroupPaths numbers layers of the same class") {
  CHECK(KerasLayerGroupPaths({"InputLayer", "Dense", "Add", "Dense", "Dense"}) ==
        std::vector<std::string>{"layers/input_layer/vars", "layers/dense/vars", "layers/add/vars",
                                 "layers/dense_1/vars", "layers/dense_2/vars"});
  CHECK(KerasLayerGroupPaths({"Dense"}, "layers/sequential/layers") ==
        std::vector<std::string>{"layers/sequential/layers/dense/vars"});
}

TEST_CASE("FormatShape prints shapes as Python does") {
  CHECK(FormatShape(std::vector<int64_t>{}) == "()");
  CHECK(FormatShape(std::vector<int64_t>{3}) == "(3,)");
  CHECK(FormatShape(std::vector<int64_t>{784, 128}) == "(784, 128)");
}

}  // namespace
}  // namespace cohort::trainer
