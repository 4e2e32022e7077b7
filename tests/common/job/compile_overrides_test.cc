// ResolveCompile: a job's compile section merged over the model file's compile_config,
// on compile_configs real Keras wrote and against Keras' own optimizer defaults.

#include "common/job/compile_overrides.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/keras/model_config.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::job {
namespace {

using keras::LearningRate;
using keras::LossKind;
using keras::MetricKind;
using keras::OptimizerKind;

// Keras' .keras files of three models (compiled with SGD, compiled without a loss,
// uncompiled) and Keras' default optimizer configs, made once for the whole binary.
class KerasFixtures {
 public:
  static const KerasFixtures& Get() {
    static const KerasFixtures* fixtures = new KerasFixtures();
    return *fixtures;
  }

  // ModelIr::compile of the fixture `name`, as ParseModelConfig reads it.
  std::optional<keras::CompileConfig> Compile(const std::string& name) const {
    absl::StatusOr<keras::ModelIr> ir =
        keras::ParseModelConfig(testing::ReadFile(dir_.File(name + ".json")));
    INFO(ir.status().ToString());
    REQUIRE(ir.ok());
    return ir->compile;
  }

  // keras.optimizers.get(name).get_config()
  const nlohmann::json& Defaults(const std::string& name) const { return defaults_.at(name); }

 private:
  KerasFixtures() {
    const std::string script = std::string(COHORT_SOURCE_DIR) + "/tests/common/job/job_helper.py";
    testing::CommandResult result =
        testing::RunCommand({COHORT_VENV_PYTHON, script, "compile-fixtures", dir_.path()},
                            absl::Seconds(300), {{"KERAS_BACKEND", "jax"}});
    INFO(result.output);
    REQUIRE(result.status.code == 0);
    defaults_ = nlohmann::json::parse(testing::ReadFile(dir_.File("optimizer_defaults.json")));
  }

  testing::TempDir dir_;
  nlohmann::json defaults_;
};

CompileOverrides WithLoss(LossKind kind) {
  CompileOverrides overrides;
  overrides.loss = keras::KerasDefaultLoss(kind);
  return overrides;
}

TEST_CASE("a loss is needed from the job or the model file", "[job]") {
  absl::Status none = ResolveCompile(std::nullopt, CompileOverrides{}).status();
  CHECK(none.code() == absl::StatusCode::kInvalidArgument);
  CHECK(none.message() == "compile.loss: not set and the model file has no compile_config");

  std::optional<keras::CompileConfig> no_loss = KerasFixtures::Get().Compile("adam_no_loss");
  REQUIRE(no_loss.has_value());
  CHECK(ResolveCompile(no_loss, CompileOverrides{}).status().message() ==
        "compile.loss: not set and the model file's compile_config has no loss");

  std::optional<keras::CompileConfig> uncompiled = KerasFixtures::Get().Compile("uncompiled");
  CHECK_FALSE(uncompiled.has_value());
  CHECK(ResolveCompile(uncompiled, CompileOverrides{}).status().message() ==
        "compile.loss: not set and the model file has no compile_config");
}

TEST_CASE("without a compile_config the job's settings take Keras' compile() defaults", "[job]") {
  absl::StatusOr<keras::CompileConfig> config =
      ResolveCompile(std::nullopt, WithLoss(LossKind::kMeanSquaredError));
  REQUIRE(config.ok());
  // Keras' model.compile(loss="mse"): RMSprop with its defaults, no metrics.
  const nlohmann::json& rmsprop = KerasFixtures::Get().Defaults("rmsprop");
  CHECK(config->optimizer.kind == OptimizerKind::kRmsprop);
  CHECK(config->optimizer.learning_rate.kind == LearningRate::Kind::kConstant);
  CHECK(config->optimizer.learning_rate.initial ==
        Approx(rmsprop["learning_rate"].get<double>()).epsilon(1e-6));
  CHECK(config->optimizer.rho == rmsprop["rho"].get<double>());
  CHECK(config->optimizer.epsilon == rmsprop["epsilon"].get<double>());
  CHECK(config->loss->kind == LossKind::kMeanSquaredError);
  CHECK(config->loss_weight == 1.0);
  CHECK(config->metrics.empty());
}

TEST_CASE("naming an optimizer gives Keras' defaults for it", "[job]") {
  const std::pair<const char*, OptimizerKind> kinds[] = {
      {"sgd", OptimizerKind::kSgd},         {"adam", OptimizerKind::kAdam},
      {"adamw", OptimizerKind::kAdamW},     {"rmsprop", OptimizerKind::kRmsprop},
      {"adagrad", OptimizerKind::kAdagrad},
  };
  // The model file's SGD(0.1, momentum=0.9, nesterov=True) is replaced, not merged.
  std::optional<keras::CompileConfig> from_model = KerasFixtures::Get().Compile("sgd_momentum");
  for (const auto& [name, kind] : kinds) {
    INFO(name);
    CompileOverrides overrides;
    overrides.optimizer.kind = kind;
    absl::StatusOr<keras::CompileConfig> config = ResolveCompile(from_model, overrides);
    REQUIRE(config.ok());
    const keras::OptimizerConfig& o = config->optimizer;
    const nlohmann::json& keras_config = KerasFixtures::Get().Defaults(name);
    CHECK(o.kind == kind);
    CHECK(o.learning_rate.initial ==
          Approx(keras_config["learning_rate"].get<double>()).epsilon(1e-6));
    const nlohmann::json& weight_decay = keras_config["weight_decay"];
    CHECK(o.weight_decay == (weight_decay.is_null() ? 0.0 : weight_decay.get<double>()));
    auto expect = [&](const char* field, double value) {
      INFO(field);
      if (keras_config.contains(field)) CHECK(value == keras_config[field].get<double>());
    };
    expect("momentum", o.momentum);
    expect("beta_1", o.beta_1);
    expect("beta_2", o.beta_2);
    expect("epsilon", o.epsilon);
    expect("rho", o.rho);
    expect("initial_accumulator_value", o.initial_accumulator_value);
    if (keras_config.contains("nesterov"))
      CHECK(o.nesterov == keras_config["nesterov"].get<bool>());
    // The loss and metrics stay the model file's.
    CHECK(config->loss->kind == LossKind::kCategoricalCrossentropy);
    CHECK(config->loss_weight == 0.5);
    REQUIRE(config->metrics.size() == 1);
    CHECK(config->metrics[0].kind == MetricKind::kAccuracy);
  }
}

TEST_CASE("options without an optimizer name change the model file's optimizer", "[job]") {
  std::optional<keras::CompileConfig> from_model = KerasFixtures::Get().Compile("sgd_momentum");
  REQUIRE(from_model.has_value());
  REQUIRE(from_model->optimizer.kind == OptimizerKind::kSgd);
  CompileOverrides overrides;
  overrides.optimizer.learning_rate = LearningRate::Constant(0.01);
  overrides.optimizer.weight_decay = 0.001;
  absl::StatusOr<keras::CompileConfig> config = ResolveCompile(from_model, overrides);
  REQUIRE(config.ok());
  CHECK(config->optimizer.kind == OptimizerKind::kSgd);
  CHECK(config->optimizer.learning_rate.initial == 0.01);
  CHECK(config->optimizer.weight_decay == 0.001);
  CHECK(config->optimizer.momentum == 0.9);  // kept from the file
  CHECK(config->optimizer.nesterov);

  // A schedule replaces the rate.
  LearningRate schedule;
  schedule.kind = LearningRate::Kind::kExponentialDecay;
  schedule.initial = 0.1;
  schedule.decay_steps = 10;
  schedule.decay_rate = 0.5;
  overrides.optimizer.learning_rate = schedule;
  config = ResolveCompile(from_model, overrides);
  REQUIRE(config.ok());
  CHECK(config->optimizer.learning_rate.kind == LearningRate::Kind::kExponentialDecay);
  CHECK(config->optimizer.learning_rate.At(20) == Approx(0.025));

  // An option the file's optimizer does not have is refused, naming it.
  CompileOverrides adam_option;
  adam_option.optimizer.beta_1 = 0.8;
  CHECK(ResolveCompile(from_model, adam_option).status().message() ==
        "compile.optimizer.beta_1: not an option of SGD");
  // ... also against Keras' default when the model has no compile_config.
  CompileOverrides sgd_option = WithLoss(LossKind::kMeanSquaredError);
  sgd_option.optimizer.nesterov = true;
  CHECK(ResolveCompile(std::nullopt, sgd_option).status().message() ==
        "compile.optimizer.nesterov: not an option of RMSprop");
}

TEST_CASE("the job's loss and metrics replace the model file's", "[job]") {
  std::optional<keras::CompileConfig> from_model = KerasFixtures::Get().Compile("sgd_momentum");
  CompileOverrides overrides = WithLoss(LossKind::kHuber);
  overrides.loss->delta = 2.0;
  overrides.metrics = {*keras::MetricFromName("mae"), *keras::MetricFromName("acc")};
  absl::StatusOr<keras::CompileConfig> config = ResolveCompile(from_model, overrides);
  REQUIRE(config.ok());
  CHECK(config->loss->kind == LossKind::kHuber);
  CHECK(config->loss->delta == 2.0);
  CHECK(config->loss_weight == 1.0);  // the file's 0.5 went with its loss
  REQUIRE(config->metrics.size() == 2);
  CHECK(config->metrics[0].kind == MetricKind::kMeanAbsoluteError);
  CHECK(config->metrics[1].kind == MetricKind::kAccuracy);  // resolved later, on shapes
  CHECK(config->metrics[1].name == "acc");
  CHECK(config->optimizer.momentum == 0.9);  // the optimizer stays the file's
}

TEST_CASE("ResolveCompile validates overrides that did not come from YAML", "[job]") {
  CompileOverrides overrides = WithLoss(LossKind::kMeanSquaredError);
  overrides.optimizer.kind = OptimizerKind::kAdam;
  overrides.optimizer.beta_2 = std::nan("");
  CHECK(ResolveCompile(std::nullopt, overrides).status().message() ==
        "compile.optimizer.beta_2: must be in [0, 1), got nan");

  CompileOverrides warmup = WithLoss(LossKind::kMeanSquaredError);
  LearningRate cosine;
  cosine.kind = LearningRate::Kind::kCosineDecay;
  cosine.warmup_target = 0.1;
  warmup.optimizer.learning_rate = cosine;
  CHECK(ResolveCompile(std::nullopt, warmup).status().message() ==
        "compile.optimizer.schedule: a warmup cannot be set in a job spec");

  CompileOverrides smoothing = WithLoss(LossKind::kCategoricalCrossentropy);
  smoothing.loss->label_smoothing = 0.1;
  CHECK(ResolveCompile(std::nullopt, smoothing).status().message() ==
        "compile.loss.label_smoothing: cannot be set in a job spec");

  CompileOverrides renamed = WithLoss(LossKind::kMeanSquaredError);
  keras::MetricConfig metric = *keras::MetricFromName("mae");
  metric.kind = MetricKind::kMeanSquaredError;
  renamed.metrics = {metric};
  CHECK(ResolveCompile(std::nullopt, renamed).status().message() ==
        "compile.metrics[0]: 'mae' is not the name of this metric");
}

}  // namespace
}  // namespace cohort::job
