// CheckData, CheckLabelRange and CheckTokenRange: the model against the arrays' headers.

#include "common/keras/data_check.h"

#include <catch2/catch.hpp>
#include <string>

#include "common/keras/model_config.h"
#include "tests/common/keras/config_builder.h"

namespace cohort::keras {
namespace {

using testing::DenseEntry;
using testing::InputEntry;
using testing::Json;
using testing::LayerEntry;
using testing::SequentialModel;

ModelIr Parse(const Json& config) {
  absl::StatusOr<ModelIr> model = ParseModelConfig(config.dump());
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  return *model;
}

ModelIr Classifier() {
  return Parse(SequentialModel(
      {InputEntry("features", {64}), DenseEntry("dense_2", 32, "relu"), DenseEntry("logits", 10)}));
}

std::string Message(const absl::Status& status) {
  REQUIRE_FALSE(status.ok());
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

TEST_CASE("x must match the model's input", "[keras]") {
  ModelIr model = Classifier();
  ArraySpec y{{100}, DType::kInt64};
  CHECK(CheckData(model, {{100, 64}, DType::kFloat32}, y, LossKind::kSparseCategoricalCrossentropy)
            .ok());
  CHECK(CheckData(model, {{100, 64}, DType::kFloat64}, y, LossKind::kSparseCategoricalCrossentropy)
            .ok());
  CHECK(CheckData(model, {{100, 64}, DType::kUint8}, y, LossKind::kSparseCategoricalCrossentropy)
            .ok());
  CHECK(Message(CheckData(model, {{100, 63}, DType::kFloat32}, y,
                          LossKind::kSparseCategoricalCrossentropy)) ==
        "layer 'dense_2' expects 64 features, data has 63");
  CHECK(Message(CheckData(model, {{100, 8, 8}, DType::kFloat32}, y,
                          LossKind::kSparseCategoricalCrossentropy)) ==
        "the model's input 'features' expects rows of shape (64,), x has rows of shape (8, 8)");
  CHECK(Message(CheckData(model, {{100, 64}, DType::kFloat32}, {{99}, DType::kInt64},
                          LossKind::kSparseCategoricalCrossentropy)) ==
        "x has 100 rows but y has 99");
  CHECK(Message(CheckData(model, {{0, 64}, DType::kFloat32}, {{0}, DType::kInt64},
                          LossKind::kSparseCategoricalCrossentropy)) == "x and y have no rows");
  CHECK(Message(
            CheckData(model, {{}, DType::kFloat32}, y, LossKind::kSparseCategoricalCrossentropy)) ==
        "x is a scalar, not an array of rows");

  ModelIr tokens = Parse(
      SequentialModel({InputEntry("tokens", {nullptr}, "int32"),
                       LayerEntry("Embedding", "emb", {{"input_dim", 100}, {"output_dim", 8}}),
                       LayerEntry("GlobalAveragePooling1D", "pool"), DenseEntry("out", 1)}));
  CHECK(CheckData(tokens, {{5, 40}, DType::kInt32}, {{5, 1}, DType::kFloat32},
                  LossKind::kBinaryCrossentropy)
            .ok());
  CHECK(CheckData(tokens, {{5, 7}, DType::kInt64}, {{5}, DType::kFloat32},
                  LossKind::kBinaryCrossentropy)
            .ok());
  CHECK(Message(CheckData(tokens, {{5, 40}, DType::kFloat32}, {{5}, DType::kFloat32},
                          LossKind::kBinaryCrossentropy)) ==
        "the model's input 'tokens' is int32 but x is float32 (convert it with x.astype('int32'))");
  CHECK(CheckTokenRange(tokens, 0, 99).ok());
  CHECK(Message(CheckTokenRange(tokens, 0, 120)) ==
        "x holds token ids up to 120 but layer 'emb' (Embedding) has input_dim 100");
  CHECK(Message(CheckTokenRange(tokens, -1, 5)) ==
        "x holds the negative token id -1, which layer 'emb' (Embedding) cannot look up");
  CHECK(CheckTokenRange(model, -5, 1000).ok());  // no Embedding reads the input
}

TEST_CASE("y must have the shape the loss needs", "[keras]") {
  ModelIr model = Classifier();
  ArraySpec x{{100, 64}, DType::kFloat32};
  auto check = [&](std::vector<int64_t> y_shape, LossKind loss) {
    return CheckData(model, x, {y_shape, DType::kFloat32}, loss);
  };
  CHECK(check({100}, LossKind::kSparseCategoricalCrossentropy).ok());
  CHECK(check({100, 1}, LossKind::kSparseCategoricalCrossentropy).ok());
  CHECK(
      Message(check({100, 10}, LossKind::kSparseCategoricalCrossentropy)) ==
      "sparse_categorical_crossentropy takes one integer class label per output row: y rows of "
      "shape () or (1,) for the output's (10,); y has rows of shape (10,) (one-hot labels go with "
      "categorical_crossentropy)");
  CHECK(check({100, 10}, LossKind::kCategoricalCrossentropy).ok());
  CHECK(
      Message(check({100}, LossKind::kCategoricalCrossentropy)) ==
      "categorical_crossentropy takes labels shaped like the output, (10,) per row; y has rows of "
      "shape () (integer class labels go with sparse_categorical_crossentropy)");
  CHECK(check({100, 10}, LossKind::kMeanSquaredError).ok());
  CHECK(Message(check({100, 9}, LossKind::kMeanAbsoluteError)) ==
        "mean_absolute_error takes labels shaped like the output, (10,) per row; y has rows of "
        "shape (9,)");

  ModelIr regression = Parse(SequentialModel({InputEntry("x", {3}), DenseEntry("y", 1)}));
  for (LossKind loss :
       {LossKind::kMeanSquaredError, LossKind::kHuber, LossKind::kBinaryCrossentropy}) {
    CHECK(CheckData(regression, {{7, 3}, DType::kFloat32}, {{7}, DType::kFloat32}, loss).ok());
    CHECK(CheckData(regression, {{7, 3}, DType::kFloat32}, {{7, 1}, DType::kFloat32}, loss).ok());
    CHECK_FALSE(
        CheckData(regression, {{7, 3}, DType::kFloat32}, {{7, 2}, DType::kFloat32}, loss).ok());
  }
}

TEST_CASE("labels must index the output's classes", "[keras]") {
  ModelIr model = Classifier();
  CHECK(CheckLabelRange(model, 0, 9).ok());
  CHECK(Message(CheckLabelRange(model, 0, 12)) ==
        "labels go up to 12 but the output has 10 classes (layer 'logits')");
  CHECK(Message(CheckLabelRange(model, -1, 3)) ==
        "labels go down to -1 but class labels start at 0");
}

}  // namespace
}  // namespace cohort::keras
