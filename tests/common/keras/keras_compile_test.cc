// compile_config as Keras writes it, Keras' learning-rate schedules and accuracy rule,
// and models Keras builds that Cohort must refuse.

#include <catch2/catch.hpp>
#include <string>

#include "common/keras/model_config.h"
#include "tests/common/keras/keras_fixtures.h"

namespace cohort::keras {
namespace {

using nlohmann::json;
using testing::KerasModels;
using testing::ReadFixture;
using testing::ReadJsonFixture;

CompileConfig CompiledWith(const std::string& dir, const std::string& name) {
  INFO("model " << name);
  absl::StatusOr<ModelIr> model = ParseModelConfig(ReadFixture(dir, name + ".config.json"));
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  REQUIRE(model->compile.has_value());
  return *model->compile;
}

std::string Refusal(const std::string& dir, const std::string& name) {
  absl::StatusOr<ModelIr> model = ParseModelConfig(ReadFixture(dir, name + ".config.json"));
  INFO("model " << name);
  REQUIRE_FALSE(model.ok());
  CHECK(model.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(model.status().message());
}

TEST_CASE("compile configs, schedules and refusals of models Keras writes", "[keras][python]") {
  const std::string& dir = KerasModels("other");

  SECTION("compile_config") {
    CompileConfig adam = CompiledWith(dir, "c_adam");
    CHECK(adam.optimizer.kind == OptimizerKind::kAdam);
    CHECK(adam.optimizer.learning_rate.kind == LearningRate::Kind::kConstant);
    CHECK(adam.optimizer.learning_rate.initial == Approx(0.001));
    CHECK(adam.optimizer.epsilon == 1e-7);
    CHECK(adam.optimizer.beta_1 == 0.9);
    CHECK(adam.optimizer.beta_2 == 0.999);
    CHECK(adam.optimizer.weight_decay == 0.0);
    REQUIRE(adam.loss.has_value());
    CHECK(adam.loss->kind == LossKind::kSparseCategoricalCrossentropy);
    CHECK_FALSE(adam.loss->from_logits);
    REQUIRE(adam.metrics.size() == 1);
    CHECK(adam.metrics[0].kind == MetricKind::kAccuracy);
    CHECK(adam.metrics[0].name == "accuracy");

    CompileConfig sgd = CompiledWith(dir, "c_sgd");
    CHECK(sgd.optimizer.kind == OptimizerKind::kSgd);
    CHECK(sgd.optimizer.learning_rate.initial == Approx(0.1));
    CHECK(sgd.optimizer.momentum == 0.9);
    CHECK(sgd.optimizer.nesterov);
    CHECK(sgd.loss->kind == LossKind::kCategoricalCrossentropy);
    CHECK(sgd.loss->from_logits);
    CHECK(sgd.loss->label_smoothing == Approx(0.1));
    REQUIRE(sgd.metrics.size() == 2);
    CHECK(sgd.metrics[0].kind == MetricKind::kCategoricalAccuracy);
    CHECK(sgd.metrics[1].kind == MetricKind::kExactAccuracy);

    CompileConfig rms = CompiledWith(dir, "c_rmsprop");
    CHECK(rms.optimizer.kind == OptimizerKind::kRmsprop);
    CHECK(rms.optimizer.learning_rate.kind == LearningRate::Kind::kExponentialDecay);
    CHECK(rms.optimizer.learning_rate.initial == Approx(0.1));
    CHECK(rms.optimizer.learning_rate.decay_steps == 100);
    CHECK(rms.optimizer.learning_rate.decay_rate == Approx(0.96));
    CHECK(rms.optimizer.learning_rate.staircase);
    CHECK(rms.optimizer.rho == Approx(0.8));
    CHECK(rms.optimizer.momentum == Approx(0.1));
    CHECK(rms.optimizer.centered);
    CHECK(rms.loss->kind == LossKind::kHuber);
    CHECK(rms.loss->delta == 1.0);  // Keras does not save Huber's delta
    REQUIRE(rms.metrics.size() == 2);
    CHECK(rms.metrics[0].kind == MetricKind::kMeanAbsoluteError);
    CHECK(rms.metrics[0].name == "mean_absolute_error");
    CHECK(rms.metrics[1].kind == MetricKind::kMeanSquaredError);
    CHECK(rms.metrics[1].name == "mse");

    CompileConfig adamw = CompiledWith(dir, "c_adamw");
    CHECK(adamw.optimizer.kind == OptimizerKind::kAdamW);
    CHECK(adamw.optimizer.weight_decay == Approx(0.01));
    CHECK(adamw.optimizer.amsgrad);
    CHECK(adamw.optimizer.learning_rate.kind == LearningRate::Kind::kCosineDecay);
    CHECK(adamw.optimizer.learning_rate.alpha == Approx(0.1));
    CHECK(adamw.optimizer.learning_rate.warmup_target == Approx(0.1));
    CHECK(adamw.optimizer.learning_rate.warmup_steps == 50);
    CHECK(adamw.loss->kind == LossKind::kBinaryCrossentropy);
    CHECK(adamw.loss->from_logits);
    REQUIRE(adamw.metrics.size() == 1);
    CHECK(adamw.metrics[0].kind == MetricKind::kBinaryAccuracy);
    CHECK(adamw.metrics[0].threshold == Approx(0.7));

    CompileConfig adagrad = CompiledWith(dir, "c_adagrad");
    CHECK(adagrad.optimizer.kind == OptimizerKind::kAdagrad);
    CHECK(adagrad.optimizer.initial_accumulator_value == Approx(0.2));
    CHECK(adagrad.optimizer.epsilon == Approx(1e-6));
    CHECK(adagrad.optimizer.clipnorm == 1.0);
    CHECK(adagrad.loss->kind == LossKind::kMeanAbsoluteError);
    REQUIRE(adagrad.metrics.size() == 1);
    CHECK(adagrad.metrics[0].kind == MetricKind::kMeanSquaredError);

    CompileConfig mse = CompiledWith(dir, "c_mse");
    CHECK(mse.optimizer.global_clipnorm == 2.0);
    CHECK_FALSE(mse.optimizer.clipnorm.has_value());
    CHECK(mse.loss->kind == LossKind::kMeanSquaredError);
    REQUIRE(mse.metrics.size() == 2);
    CHECK(mse.metrics[0].kind == MetricKind::kMeanAbsoluteError);
    CHECK(mse.metrics[1].kind == MetricKind::kAccuracy);
    CHECK(mse.metrics[1].name == "acc");

    CompileConfig list = CompiledWith(dir, "c_list");
    CHECK(list.optimizer.learning_rate.initial == Approx(0.01));
    CHECK(list.loss->kind == LossKind::kMeanAbsoluteError);
    CHECK(list.loss_weight == 0.5);
    REQUIRE(list.metrics.size() == 1);
    CHECK(list.metrics[0].kind == MetricKind::kMeanSquaredError);

    CompileConfig noloss = CompiledWith(dir, "c_noloss");
    CHECK(noloss.optimizer.kind == OptimizerKind::kRmsprop);
    CHECK_FALSE(noloss.loss.has_value());
    CHECK(noloss.metrics.empty());
  }

  SECTION("learning-rate schedules match Keras step by step") {
    json schedules = ReadJsonFixture(dir, "schedules.json");
    LearningRate exp_staircase = CompiledWith(dir, "c_rmsprop").optimizer.learning_rate;
    LearningRate cos_warmup = CompiledWith(dir, "c_adamw").optimizer.learning_rate;
    LearningRate exp;
    exp.kind = LearningRate::Kind::kExponentialDecay;
    exp.initial = 0.1;
    exp.decay_steps = 7;
    exp.decay_rate = 0.5;
    LearningRate cos;
    cos.kind = LearningRate::Kind::kCosineDecay;
    cos.initial = 0.02;
    cos.decay_steps = 30;
    cos.alpha = 0.2;
    const json& steps = schedules["steps"];
    const json& rates = schedules["rates"];
    for (size_t i = 0; i < steps.size(); ++i) {
      int64_t step = steps[i].get<int64_t>();
      INFO("step " << step);
      // Keras computes in float32.
      CHECK(exp_staircase.At(step) ==
            Approx(rates["exp_staircase"][i].get<double>()).epsilon(1e-5));
      CHECK(exp.At(step) == Approx(rates["exp"][i].get<double>()).epsilon(1e-5).margin(1e-30));
      CHECK(cos_warmup.At(step) == Approx(rates["cos_warmup"][i].get<double>()).epsilon(1e-5));
      CHECK(cos.At(step) == Approx(rates["cos"][i].get<double>()).epsilon(1e-5));
    }
  }

  SECTION("accuracy resolves as Keras resolves it") {
    MetricConfig accuracy = *MetricFromName("accuracy");
    for (const json& c : ReadJsonFixture(dir, "accuracy_rule.json")) {
      Shape y = c["y"].get<Shape>();
      Shape out = c["out"].get<Shape>();
      INFO("y " << ShapeToString(y) << " output " << ShapeToString(out));
      MetricKind want = c["binary"].get<bool>()   ? MetricKind::kBinaryAccuracy
                        : c["sparse"].get<bool>() ? MetricKind::kSparseCategoricalAccuracy
                                                  : MetricKind::kCategoricalAccuracy;
      CHECK(ResolveMetric(accuracy, y, out).kind == want);
    }
  }

  SECTION("refusals name the layer and say why") {
    CHECK_THAT(Refusal(dir, "bad_lstm"),
               Catch::StartsWith("layer 'lstm_1' has class LSTM, which Cohort does not support; "
                                 "supported: InputLayer, Dense, Conv1D"));
    CHECK_THAT(Refusal(dir, "bad_nested"),
               Catch::Contains("layer 'inner' (Sequential) is a nested model"));
    CHECK_THAT(Refusal(dir, "bad_shared"),
               Catch::Contains("layer 'shared_dense' (Dense) is called 2 times (a shared layer)"));
    CHECK_THAT(Refusal(dir, "bad_two_inputs"),
               Catch::Contains("the model has 2 inputs ('a', 'b'); Cohort supports models with one "
                               "input"));
    CHECK_THAT(Refusal(dir, "bad_two_outputs"),
               Catch::Contains("the model has 2 outputs ('head1', 'head2')"));
    CHECK_THAT(Refusal(dir, "bad_channels_first"),
               Catch::Contains("layer 'cf' (Conv2D): data_format channels_first is not supported"));
    CHECK_THAT(Refusal(dir, "bad_mask_zero"),
               Catch::Contains("layer 'emb' (Embedding): mask_zero=True is not supported"));
    CHECK_THAT(
        Refusal(dir, "bad_mixed"),
        Catch::Contains("layer 'half' (Dense): dtype policy 'mixed_float16' is not supported"));
    CHECK_THAT(Refusal(dir, "bad_regularizer"),
               Catch::Contains("layer 'reg' (Dense): kernel_regularizer is not supported"));
    CHECK_THAT(Refusal(dir, "bad_orthogonal"),
               Catch::Contains("layer 'ortho' (Dense): kernel_initializer Orthogonal is not "
                               "supported"));
    CHECK_THAT(Refusal(dir, "bad_ema"),
               Catch::Contains("compile_config: optimizer Adam: use_ema=True"));
    CHECK_THAT(Refusal(dir, "bad_loss"),
               Catch::Contains("compile_config: loss kl_divergence is not "
                               "supported"));
    CHECK_THAT(Refusal(dir, "bad_optimizer"),
               Catch::Contains("compile_config: optimizer Nadam is not supported; supported: SGD, "
                               "Adam, AdamW, RMSprop, Adagrad"));
  }
}

}  // namespace
}  // namespace cohort::keras
