// ParseJobSpec / LoadJobSpec on valid specs: every field, defaults, shorthands, paths.

#include <catch2/catch.hpp>
#include <filesystem>

#include "common/job/job_spec_yaml.h"
#include "tests/support/temp_dir.h"

namespace cohort::job {
namespace {

using keras::LearningRate;
using keras::LossKind;
using keras::MetricKind;
using keras::OptimizerKind;

JobSpec Parse(const std::string& yaml) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "/jobs/digits", "default-name");
  INFO(spec.status().ToString());
  REQUIRE(spec.ok());
  return *spec;
}

constexpr char kMinimal[] = R"(
model: model.keras
data: {x: x.npy, y: y.npy}
)";

TEST_CASE("a minimal spec takes Keras' and Cohort's defaults", "[job]") {
  JobSpec spec = Parse(kMinimal);
  CHECK(spec.name == "default-name");
  CHECK(spec.model == ModelRef{ModelFormat::kKeras, "/jobs/digits/model.keras"});
  CHECK(spec.data.x == ArrayRef{"/jobs/digits/x.npy", ""});
  CHECK(spec.data.y == ArrayRef{"/jobs/digits/y.npy", ""});
  CHECK_FALSE(spec.data.validation_x.has_value());
  CHECK_FALSE(spec.data.validation_y.has_value());
  CHECK(spec.data.validation_split == 0.0);
  CHECK(spec.fit == FitSpec{.epochs = 1, .batch_size = 32, .shuffle = true, .seed = 0});
  CHECK(spec.compile == CompileOverrides{});
  CHECK(spec.resources == ResourcesSpec{.workers = 1, .device = Device::kCpu});
  CHECK(spec.checkpoint == CheckpointSpec{.every_epochs = 1, .keep = 2});
  CHECK(spec.max_restarts == 3);
  CHECK(spec.priority == 0);
  CHECK_FALSE(spec.trace);
}

TEST_CASE("a full spec sets every field", "[job]") {
  JobSpec spec = Parse(R"(
name: digits-cnn
model: models/cnn.json
data:
  x: {path: data/digits.npz, key: x_train}
  y: {path: data/digits.npz, key: y_train}
  validation_x: /shared/x_test.npy
  validation_y: /shared/y_test.npy
fit:
  epochs: 10
  batch_size: 128
  shuffle: false
  seed: 18446744073709551615
  precision: mixed_bfloat16
compile:
  optimizer: {name: sgd, learning_rate: 0.05, momentum: 0.9, nesterov: true, weight_decay: 0.0001}
  loss: {name: categorical_crossentropy, from_logits: true}
  metrics: [accuracy, mae]
resources:
  workers: 4
  device: cuda
checkpoint:
  every_epochs: 0
  keep: 5
max_restarts: 0
priority: -7
trace: true
)");
  CHECK(spec.name == "digits-cnn");
  CHECK(spec.model == ModelRef{ModelFormat::kJson, "/jobs/digits/models/cnn.json"});
  CHECK(spec.data.x == ArrayRef{"/jobs/digits/data/digits.npz", "x_train"});
  CHECK(spec.data.y == ArrayRef{"/jobs/digits/data/digits.npz", "y_train"});
  CHECK(spec.data.validation_x == ArrayRef{"/shared/x_test.npy", ""});
  CHECK(spec.data.validation_y == ArrayRef{"/shared/y_test.npy", ""});
  CHECK(spec.fit ==
        FitSpec{.epochs = 10, .batch_size = 128, .shuffle = false, .seed = 18446744073709551615u,
                .precision = Precision::kMixedBfloat16});
  const OptimizerOverrides& o = spec.compile.optimizer;
  CHECK(o.kind == OptimizerKind::kSgd);
  REQUIRE(o.learning_rate.has_value());
  CHECK(o.learning_rate->kind == LearningRate::Kind::kConstant);
  CHECK(o.learning_rate->initial == 0.05);
  CHECK(o.momentum == 0.9);
  CHECK(o.nesterov == true);
  CHECK(o.weight_decay == 0.0001);
  CHECK_FALSE(o.beta_1.has_value());
  REQUIRE(spec.compile.loss.has_value());
  CHECK(spec.compile.loss->kind == LossKind::kCategoricalCrossentropy);
  CHECK(spec.compile.loss->from_logits);
  REQUIRE(spec.compile.metrics.size() == 2);
  CHECK(spec.compile.metrics[0].kind == MetricKind::kAccuracy);
  CHECK(spec.compile.metrics[0].name == "accuracy");
  CHECK(spec.compile.metrics[1].kind == MetricKind::kMeanAbsoluteError);
  CHECK(spec.compile.metrics[1].name == "mae");
  CHECK(spec.resources == ResourcesSpec{.workers = 4, .device = Device::kCuda});
  CHECK(spec.checkpoint == CheckpointSpec{.every_epochs = 0, .keep = 5});
  CHECK(spec.max_restarts == 0);
  CHECK(spec.priority == -7);
  CHECK(spec.trace);
}

TEST_CASE("optimizer, loss and learning-rate shorthands", "[job]") {
  JobSpec spec = Parse(std::string(kMinimal) + R"(
compile:
  optimizer: Adam
  learning_rate: 0.01
  loss: mse
  metrics: [MeanSquaredError, acc]
)");
  CHECK(spec.compile.optimizer.kind == OptimizerKind::kAdam);
  REQUIRE(spec.compile.optimizer.learning_rate.has_value());
  CHECK(spec.compile.optimizer.learning_rate->kind == LearningRate::Kind::kConstant);
  CHECK(spec.compile.optimizer.learning_rate->initial == 0.01);
  REQUIRE(spec.compile.loss.has_value());
  CHECK(spec.compile.loss->kind == LossKind::kMeanSquaredError);
  CHECK_FALSE(spec.compile.loss->from_logits);
  REQUIRE(spec.compile.metrics.size() == 2);
  CHECK(spec.compile.metrics[0].kind == MetricKind::kMeanSquaredError);
  CHECK(spec.compile.metrics[1].kind == MetricKind::kAccuracy);
  CHECK(spec.compile.metrics[1].name == "acc");

  // The learning-rate shorthand alone keeps the model's optimizer kind.
  JobSpec rate_only = Parse(std::string(kMinimal) + "compile: {learning_rate: 3e-4}\n");
  CHECK_FALSE(rate_only.compile.optimizer.kind.has_value());
  CHECK(rate_only.compile.optimizer.learning_rate->initial == 3e-4);
}

TEST_CASE("Keras' names and aliases are accepted", "[job]") {
  struct Case {
    std::string name;
    OptimizerKind kind;
  };
  for (const Case& c :
       {Case{"sgd", OptimizerKind::kSgd}, Case{"SGD", OptimizerKind::kSgd},
        Case{"adam", OptimizerKind::kAdam}, Case{"AdamW", OptimizerKind::kAdamW},
        Case{"adamw", OptimizerKind::kAdamW}, Case{"RMSprop", OptimizerKind::kRmsprop},
        Case{"rmsprop", OptimizerKind::kRmsprop}, Case{"Adagrad", OptimizerKind::kAdagrad}}) {
    INFO(c.name);
    CHECK(Parse(std::string(kMinimal) + "compile: {optimizer: " + c.name + "}\n")
              .compile.optimizer.kind == c.kind);
    CHECK(Parse(std::string(kMinimal) + "compile: {optimizer: {name: " + c.name + "}}\n")
              .compile.optimizer.kind == c.kind);
  }
  struct LossCase {
    std::string name;
    LossKind kind;
  };
  for (const LossCase& c : {
           LossCase{"sparse_categorical_crossentropy", LossKind::kSparseCategoricalCrossentropy},
           LossCase{"SparseCategoricalCrossentropy", LossKind::kSparseCategoricalCrossentropy},
           LossCase{"categorical_crossentropy", LossKind::kCategoricalCrossentropy},
           LossCase{"binary_crossentropy", LossKind::kBinaryCrossentropy},
           LossCase{"bce", LossKind::kBinaryCrossentropy},
           LossCase{"mse", LossKind::kMeanSquaredError},
           LossCase{"MSE", LossKind::kMeanSquaredError},
           LossCase{"mean_squared_error", LossKind::kMeanSquaredError},
           LossCase{"mae", LossKind::kMeanAbsoluteError},
           LossCase{"MeanAbsoluteError", LossKind::kMeanAbsoluteError},
           LossCase{"huber", LossKind::kHuber},
           LossCase{"Huber", LossKind::kHuber},
       }) {
    INFO(c.name);
    CHECK(Parse(std::string(kMinimal) + "compile: {loss: " + c.name + "}\n").compile.loss->kind ==
          c.kind);
  }
  JobSpec metrics = Parse(std::string(kMinimal) +
                          "compile: {metrics: [Accuracy, binary_accuracy, categorical_accuracy, "
                          "sparse_categorical_accuracy, mean_absolute_error, MSE]}\n");
  REQUIRE(metrics.compile.metrics.size() == 6);
  CHECK(metrics.compile.metrics[0].kind == MetricKind::kAccuracy);
  CHECK(metrics.compile.metrics[1].kind == MetricKind::kBinaryAccuracy);
  CHECK(metrics.compile.metrics[2].kind == MetricKind::kCategoricalAccuracy);
  CHECK(metrics.compile.metrics[3].kind == MetricKind::kSparseCategoricalAccuracy);
  CHECK(metrics.compile.metrics[4].kind == MetricKind::kMeanAbsoluteError);
  CHECK(metrics.compile.metrics[5].kind == MetricKind::kMeanSquaredError);
}

TEST_CASE("optimizer maps carry every option of their kind", "[job]") {
  JobSpec adam = Parse(std::string(kMinimal) + R"(
compile:
  optimizer: {name: adamw, learning_rate: 0.002, beta_1: 0.8, beta_2: 0.99, epsilon: 1e-8, weight_decay: 0.01}
)");
  const OptimizerOverrides& a = adam.compile.optimizer;
  CHECK(a.kind == OptimizerKind::kAdamW);
  CHECK(a.beta_1 == 0.8);
  CHECK(a.beta_2 == 0.99);
  CHECK(a.epsilon == 1e-8);
  CHECK(a.weight_decay == 0.01);

  JobSpec rmsprop = Parse(std::string(kMinimal) +
                          "compile: {optimizer: {name: rmsprop, rho: 0.8, momentum: 0.5}}\n");
  CHECK(rmsprop.compile.optimizer.rho == 0.8);
  CHECK(rmsprop.compile.optimizer.momentum == 0.5);

  JobSpec adagrad =
      Parse(std::string(kMinimal) +
            "compile: {optimizer: {name: adagrad, initial_accumulator_value: 0.2}}\n");
  CHECK(adagrad.compile.optimizer.initial_accumulator_value == 0.2);

  // Without a name the options change the model file's optimizer.
  JobSpec unnamed = Parse(std::string(kMinimal) + "compile: {optimizer: {epsilon: 1e-6}}\n");
  CHECK_FALSE(unnamed.compile.optimizer.kind.has_value());
  CHECK(unnamed.compile.optimizer.epsilon == 1e-6);
}

TEST_CASE("learning-rate schedules", "[job]") {
  JobSpec exponential = Parse(std::string(kMinimal) + R"(
compile:
  optimizer:
    name: adam
    schedule: {name: exponential_decay, initial_learning_rate: 0.01, decay_steps: 100, decay_rate: 0.9, staircase: true}
)");
  const LearningRate& e = *exponential.compile.optimizer.learning_rate;
  CHECK(e.kind == LearningRate::Kind::kExponentialDecay);
  CHECK(e.initial == 0.01);
  CHECK(e.decay_steps == 100);
  CHECK(e.decay_rate == 0.9);
  CHECK(e.staircase);

  JobSpec cosine = Parse(std::string(kMinimal) + R"(
compile:
  optimizer:
    name: sgd
    schedule: {name: CosineDecay, initial_learning_rate: 0.1, decay_steps: 1000}
)");
  const LearningRate& c = *cosine.compile.optimizer.learning_rate;
  CHECK(c.kind == LearningRate::Kind::kCosineDecay);
  CHECK(c.initial == 0.1);
  CHECK(c.decay_steps == 1000);
  CHECK(c.alpha == 0.0);
  CHECK_FALSE(c.warmup_target.has_value());

  JobSpec with_alpha = Parse(std::string(kMinimal) +
                             "compile: {optimizer: {name: sgd, schedule: {name: cosine_decay, "
                             "initial_learning_rate: 0.1, decay_steps: 10, alpha: 0.25}}}\n");
  CHECK(with_alpha.compile.optimizer.learning_rate->alpha == 0.25);
}

TEST_CASE("loss options", "[job]") {
  JobSpec huber = Parse(std::string(kMinimal) + "compile: {loss: {name: huber, delta: 2.5}}\n");
  CHECK(huber.compile.loss->kind == LossKind::kHuber);
  CHECK(huber.compile.loss->delta == 2.5);
  JobSpec bce = Parse(std::string(kMinimal) +
                      "compile: {loss: {name: binary_crossentropy, from_logits: true}}\n");
  CHECK(bce.compile.loss->kind == LossKind::kBinaryCrossentropy);
  CHECK(bce.compile.loss->from_logits);
  CHECK(bce.compile.loss->delta == 1.0);
}

TEST_CASE("validation split, booleans, numbers and empty sections", "[job]") {
  JobSpec spec = Parse(R"(
model: m.keras
data:
  x: x.npy
  y: y.npy
  validation_split: .25
fit: {epochs: 3, batch_size: 6, shuffle: True}
resources: {workers: 3}
compile:
checkpoint:
)");
  CHECK(spec.data.validation_split == 0.25);
  CHECK(spec.fit.shuffle);
  CHECK(spec.fit.batch_size == 6);
  CHECK(spec.resources.workers == 3);
  CHECK(spec.compile == CompileOverrides{});
  CHECK(spec.checkpoint == CheckpointSpec{});
  // Quoted numbers and names read the same as plain ones.
  JobSpec quoted = Parse(std::string(kMinimal) + "fit: {epochs: \"4\"}\nname: \"q-1\"\n");
  CHECK(quoted.fit.epochs == 4);
  CHECK(quoted.name == "q-1");
  // An empty metrics list leaves the model file's metrics.
  CHECK(Parse(std::string(kMinimal) + "compile: {metrics: []}\n").compile.metrics.empty());
}

TEST_CASE("paths are resolved against the base directory and normalized", "[job]") {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(R"(
model: ../models/./m.keras
data:
  x: /abs/dir/../x.npy
  y: "sub dir/y é.npy"
  validation_x: {path: ./v.npz, key: vx}
  validation_y: {path: v.npz, key: vy}
)",
                                              "/base/jobs/", "n");
  REQUIRE(spec.ok());
  CHECK(spec->model.path == "/base/models/m.keras");
  CHECK(spec->data.x.path == "/abs/x.npy");
  CHECK(spec->data.y.path == "/base/jobs/sub dir/y é.npy");
  CHECK(spec->data.validation_x->path == "/base/jobs/v.npz");
  CHECK(spec->data.validation_y->path == "/base/jobs/v.npz");

  // A relative base directory is taken from the working directory.
  absl::StatusOr<JobSpec> relative = ParseJobSpec(kMinimal, "rel", "n");
  REQUIRE(relative.ok());
  CHECK(relative->model.path ==
        (std::filesystem::current_path() / "rel/model.keras").lexically_normal().string());
}

TEST_CASE("LoadJobSpec reads a file, resolving paths from its directory", "[job]") {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("jobs"));
  testing::WriteFile(dir.File("jobs/mnist-mlp.yaml"), kMinimal);
  absl::StatusOr<JobSpec> spec = LoadJobSpec(dir.File("jobs/mnist-mlp.yaml"));
  REQUIRE(spec.ok());
  CHECK(spec->name == "mnist-mlp");
  CHECK(spec->model.path == dir.File("jobs/model.keras"));
  CHECK(spec->data.x.path == dir.File("jobs/x.npy"));

  // The YAML's name wins over the file's stem; the stem must be a valid name otherwise.
  testing::WriteFile(dir.File("jobs/bad stem.yaml"), std::string(kMinimal) + "name: ok\n");
  CHECK(LoadJobSpec(dir.File("jobs/bad stem.yaml"))->name == "ok");
  testing::WriteFile(dir.File("jobs/bad stem.yaml"), kMinimal);
  absl::Status bad_stem = LoadJobSpec(dir.File("jobs/bad stem.yaml")).status();
  CHECK(bad_stem.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad_stem.message()),
             Catch::StartsWith(dir.File("jobs/bad stem.yaml") + ": name (not set; the default is "
                                                                "the file's stem): 'bad stem'"));

  // Errors name the file.
  testing::WriteFile(dir.File("jobs/typo.yaml"), std::string(kMinimal) + "fit: {epoch: 2}\n");
  absl::Status typo = LoadJobSpec(dir.File("jobs/typo.yaml")).status();
  CHECK(typo.message() == dir.File("jobs/typo.yaml") +
                              ": fit.epoch: unknown field (did you mean 'epochs'?) (line 4)");

  absl::Status missing = LoadJobSpec(dir.File("jobs/none.yaml")).status();
  CHECK(missing.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.message()), Catch::Contains("none.yaml"));
  CHECK(LoadJobSpec(dir.File("jobs")).status().code() == absl::StatusCode::kNotFound);

  // A file past the size limit is refused without being parsed.
  testing::WriteFile(dir.File("jobs/huge.yaml"), std::string(kMaxJobSpecBytes + 10, '#'));
  CHECK_THAT(std::string(LoadJobSpec(dir.File("jobs/huge.yaml")).status().message()),
             Catch::Contains("too long (more than 1048576 bytes)"));
}

}  // namespace
}  // namespace cohort::job
