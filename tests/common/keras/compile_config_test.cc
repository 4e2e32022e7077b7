// compile_config.h on its own: names as Keras looks them up, Keras defaults, and the
// refusals of settings Cohort does not support.

#include "common/keras/compile_config.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "common/keras/model_config.h"
#include "tests/common/keras/config_builder.h"

namespace cohort::keras {
namespace {

using nlohmann::json;

std::string Refusal(const json& compile) {
  absl::StatusOr<CompileConfig> parsed = ParseCompileConfig(compile);
  INFO(compile.dump());
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(parsed.status().message());
}

TEST_CASE("names resolve as Keras resolves them", "[keras]") {
  CHECK(OptimizerKindFromName("adam") == OptimizerKind::kAdam);
  CHECK(OptimizerKindFromName("ADAMW") == OptimizerKind::kAdamW);
  CHECK(OptimizerKindFromName("RMSprop") == OptimizerKind::kRmsprop);
  CHECK(OptimizerKindFromName("sgd") == OptimizerKind::kSgd);
  CHECK(OptimizerKindFromName("adagrad") == OptimizerKind::kAdagrad);
  CHECK_FALSE(OptimizerKindFromName("nadam").has_value());
  CHECK(OptimizerKindName(OptimizerKind::kRmsprop) == "RMSprop");

  CHECK(LossKindFromName("mse") == LossKind::kMeanSquaredError);
  CHECK(LossKindFromName("MAE") == LossKind::kMeanAbsoluteError);
  CHECK(LossKindFromName("bce") == LossKind::kBinaryCrossentropy);
  CHECK(LossKindFromName("SparseCategoricalCrossentropy") ==
        LossKind::kSparseCategoricalCrossentropy);
  CHECK(LossKindFromName("huber") == LossKind::kHuber);
  CHECK_FALSE(LossKindFromName("Mse").has_value());  // Keras' lookup is case-sensitive here
  CHECK(LossKindName(LossKind::kCategoricalCrossentropy) == "categorical_crossentropy");

  CHECK(MetricFromName("ACC")->kind == MetricKind::kAccuracy);
  CHECK(MetricFromName("ACC")->name == "ACC");
  CHECK(MetricFromName("sparse_categorical_accuracy")->kind ==
        MetricKind::kSparseCategoricalAccuracy);
  CHECK(MetricFromName("MeanSquaredError")->kind == MetricKind::kMeanSquaredError);
  CHECK_FALSE(MetricFromName("auc").has_value());
  MetricConfig mae = *MetricFromName("mae");
  CHECK(ResolveMetric(mae, {}, {10}).kind == MetricKind::kMeanAbsoluteError);
}

TEST_CASE("Keras defaults fill every struct", "[keras]") {
  OptimizerConfig sgd = KerasDefaultOptimizer(OptimizerKind::kSgd);
  CHECK(sgd.learning_rate.At(0) == 0.01);
  CHECK(sgd.momentum == 0.0);
  CHECK_FALSE(sgd.nesterov);
  OptimizerConfig adam = KerasDefaultOptimizer(OptimizerKind::kAdam);
  CHECK(adam.learning_rate.At(100) == 0.001);
  CHECK(adam.epsilon == 1e-7);
  CHECK(adam.weight_decay == 0.0);
  CHECK(KerasDefaultOptimizer(OptimizerKind::kAdamW).weight_decay == 0.004);
  OptimizerConfig rms = KerasDefaultOptimizer(OptimizerKind::kRmsprop);
  CHECK(rms.rho == 0.9);
  CHECK_FALSE(rms.centered);
  CHECK(KerasDefaultOptimizer(OptimizerKind::kAdagrad).initial_accumulator_value == 0.1);
  LossConfig huber = KerasDefaultLoss(LossKind::kHuber);
  CHECK(huber.delta == 1.0);
  CHECK_FALSE(huber.from_logits);

  absl::StatusOr<CompileConfig> bare = ParseCompileConfig(
      json{{"optimizer", "adamw"}, {"loss", "binary_crossentropy"}, {"metrics", {"accuracy"}}});
  REQUIRE(bare.ok());
  CHECK(bare->optimizer.kind == OptimizerKind::kAdamW);
  CHECK(bare->optimizer.weight_decay == 0.004);
  CHECK(bare->loss->kind == LossKind::kBinaryCrossentropy);
  CHECK(bare->loss_weight == 1.0);
  REQUIRE(bare->metrics.size() == 1);
  CHECK(ParseCompileConfig(json::object())->optimizer.kind == OptimizerKind::kRmsprop);
}

TEST_CASE("unsupported compile settings are refused naming the field", "[keras]") {
  json adam = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}};
  auto with = [&](const std::string& key, json value) {
    json out = adam;
    out["config"][key] = value;
    return json{{"optimizer", out}};
  };
  json clipped = with("clipnorm", 1.0);
  clipped["optimizer"]["config"]["clipvalue"] = 1.0;
  CHECK_THAT(Refusal(clipped),
             Catch::Contains("only one of clipnorm, global_clipnorm and clipvalue may be set"));
  CHECK_THAT(Refusal(with("learning_rate",
                          {{"class_name", "PiecewiseConstantDecay"}, {"config", json::object()}})),
             Catch::Contains(
                 "compile_config: optimizer Adam: learning_rate schedule PiecewiseConstantDecay is "
                 "not supported; supported: ExponentialDecay, CosineDecay"));
  CHECK_THAT(Refusal(with("learning_rate", "fast")),
             Catch::Contains("learning_rate schedule fast is not supported"));
  CHECK_THAT(Refusal(with("learning_rate", -1)),
             Catch::Contains("learning_rate must not be negative"));
  CHECK_THAT(Refusal(with("gradient_accumulation_steps", 4)),
             Catch::Contains("gradient_accumulation_steps is not supported"));
  CHECK_THAT(Refusal(with("beta_1", "high")), Catch::Contains("field 'beta_1' must be a number"));
  CHECK_THAT(Refusal(with("loss_scale_factor", 128)),
             Catch::Contains("loss_scale_factor is not supported"));

  CHECK_THAT(
      Refusal({{"loss", {{"out1", "mse"}, {"out2", "mae"}}}}),
      Catch::Contains("compile_config: a loss per output (several outputs) is not supported"));
  CHECK_THAT(Refusal({{"loss", {"mse", "mae"}}}),
             Catch::Contains("a loss per output (several outputs)"));
  CHECK_THAT(
      Refusal({{"loss", {{"class_name", "MeanSquaredError"}, {"config", {{"reduction", "sum"}}}}}}),
      Catch::Contains("reduction 'sum' is not supported"));
  CHECK_THAT(Refusal({{"loss",
                       {{"class_name", "SparseCategoricalCrossentropy"},
                        {"config", {{"ignore_class", 0}}}}}}),
             Catch::Contains("ignore_class is not supported"));
  CHECK_THAT(Refusal({{"loss", "crossentropy"}}),
             Catch::Contains(
                 "loss crossentropy is not supported; supported: sparse_categorical_crossentropy"));
  CHECK_THAT(
      Refusal({{"loss_weights", {{"out", 1.0}}}}),
      Catch::Contains("loss_weights must be one number for the single output, got an object"));
  CHECK_THAT(Refusal({{"metrics", {{"a", {"mae"}}}}}),
             Catch::Contains("metrics must be a list, got an object"));
  CHECK_THAT(Refusal({{"metrics", {{"mae"}, {"mse"}}}}),
             Catch::Contains("metrics per output (several outputs) are not supported"));
  CHECK_THAT(Refusal({{"metrics", {"auc"}}}), Catch::Contains("metric auc is not supported"));
  CHECK_THAT(Refusal({{"weighted_metrics", {"mae"}}}),
             Catch::Contains("weighted_metrics is not supported"));
  CHECK_THAT(Refusal(json(5)),
             Catch::Contains("compile_config must be an object, got the integer 5"));

  // Through the model parser.
  json model =
      testing::SequentialModel({testing::InputEntry("in", {2}), testing::DenseEntry("d", 1)});
  model["compile_config"] = json::object();
  REQUIRE(ParseModelConfig(model.dump()).ok());
  CHECK_FALSE(ParseModelConfig(model.dump())->compile.has_value());
  model["compile_config"] = {{"optimizer", "nadam"}};
  absl::StatusOr<ModelIr> refused = ParseModelConfig(model.dump());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() ==
        "compile_config: optimizer nadam is not supported; supported: SGD, Adam, AdamW, RMSprop, "
        "Adagrad");
}

}  // namespace
}  // namespace cohort::keras
