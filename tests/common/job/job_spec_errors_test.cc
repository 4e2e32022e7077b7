// ParseJobSpec on bad specs: every error is INVALID_ARGUMENT naming the field, the
// problem and the line.

#include <catch2/catch.hpp>

#include "common/job/job_spec_yaml.h"

namespace cohort::job {
namespace {

// Lines 1 and 2; the cases below start at line 3.
constexpr char kHead[] = "model: m.keras\ndata: {x: x.npy, y: y.npy}\n";

std::string Error(const std::string& yaml) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "/jobs", "job");
  if (spec.ok()) return "OK";
  CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

struct Case {
  std::string yaml;  // appended to kHead
  std::string error;
};

void CheckAll(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    INFO(c.yaml);
    CHECK(Error(kHead + c.yaml) == c.error);
  }
}

TEST_CASE("the document must be one map", "[job]") {
  CHECK(Error("") ==
        "job spec: the file is empty; it needs at least model: and data: (see "
        "docs/job-spec.md)");
  CHECK(Error("# only a comment\n") == Error(""));
  CHECK(Error("~\n") == Error(""));
  CHECK(Error("- model: m.keras\n") ==
        "job spec: must be a map of fields (name, model, data, fit, ...), got a list (line 1)");
  CHECK(
      Error("just words") ==
      "job spec: must be a map of fields (name, model, data, fit, ...), got 'just words' (line 1)");
  CHECK(Error("a: 1\n---\nb: 2\n") ==
        "job spec: a second YAML document starts at line 2; a job spec is one");
  CHECK(Error(std::string(kHead) + "...\n") == "OK");  // an explicit end of the document
  // Input on which yaml-cpp's LoadAll never returns (found by tests/fuzz/job_spec_fuzz.cc).
  CHECK_THAT(Error(",[[[[[[[[[[[[[[\300[[[[[[[[\245\244\244\236[[[[[model: m.kerac\n!d\032aname: "
                   "dgitt]: grans-c[[[["),
             Catch::StartsWith("job spec: "));
  CHECK_THAT(Error("model: [unclosed\n"), Catch::StartsWith("job spec: invalid YAML: "));
  CHECK_THAT(Error("model: m.keras\n  data: x\n"), Catch::StartsWith("job spec: invalid YAML: "));
  CHECK_THAT(Error("model: m.keras\n  data: x\n"), Catch::EndsWith("(line 2)"));
  CHECK_THAT(Error(std::string(200, '[')), Catch::StartsWith("job spec: invalid YAML: "));
}

TEST_CASE("required fields", "[job]") {
  CHECK(Error("data: {x: x.npy, y: y.npy}\n") == "model: required");
  CHECK(Error("model: m.keras\n") == "data: required");
  CHECK(Error("model: m.keras\ndata: {x: x.npy}\n") == "data.y: required (in data, line 2)");
  CHECK(Error("model: m.keras\ndata:\n  y: y.npy\n") == "data.x: required (in data, line 2)");
  CHECK(Error("model: m.keras\ndata:\n") == "data.x: required (in data, line 2)");
  CHECK(Error("model:\ndata: {x: x.npy, y: y.npy}\n") ==
        "model: must be a string, got nothing (line 1)");
}

TEST_CASE("unknown and repeated fields", "[job]") {
  CheckAll({
      {"fit:\n  epoch: 3\n", "fit.epoch: unknown field (did you mean 'epochs'?) (line 4)"},
      {"fit: {batchsize: 3}\n",
       "fit.batchsize: unknown field (did you mean 'batch_size'?) (line 3)"},
      {"fit: {Epochs: 3}\n", "fit.Epochs: unknown field (did you mean 'epochs'?) (line 3)"},
      {"compile: {optimiser: adam}\n",
       "compile.optimiser: unknown field (did you mean 'optimizer'?) (line 3)"},
      {"compile: {optimizer: {name: adam, learnig_rate: 0.1}}\n",
       "compile.optimizer.learnig_rate: unknown field (did you mean 'learning_rate'?) (line 3)"},
      {"resources: {d: 2}\n", "resources.d: unknown field; known: workers, device (line 3)"},
      {"resources: {Device: cpu}\n",
       "resources.Device: unknown field (did you mean 'device'?) (line 3)"},
      {"resources: {gpus: 2}\n", "resources.gpus: unknown field; known: workers, device (line 3)"},
      {"epochs: 3\n",
       "epochs: unknown field; known: name, model, data, fit, compile, resources, checkpoint, "
       "max_restarts, priority, trace (line 3)"},
      {"priorty: 3\n", "priorty: unknown field (did you mean 'priority'?) (line 3)"},
      {"fit: {epochs: 2}\nfit: {epochs: 3}\n", "fit: set twice (lines 3 and 4)"},
      {"fit:\n  epochs: 2\n  epochs: 3\n", "fit.epochs: set twice (lines 4 and 5)"},
      {"? [a, b]\n: 1\n", "job spec: a key must be a name, got a list (line 3)"},
  });
  CHECK(Error("model: m.keras\nmodel: n.keras\ndata: {x: x.npy, y: y.npy}\n") ==
        "model: set twice (lines 1 and 2)");
}

TEST_CASE("wrong types", "[job]") {
  CheckAll({
      {"fit:\n  epochs: 10\n  batch_size: abc\n",
       "fit.batch_size: must be a positive integer, got 'abc' (line 5)"},
      {"fit: {epochs: 2.5}\n", "fit.epochs: must be a positive integer, got '2.5' (line 3)"},
      {"fit: {epochs: 99999999999}\n",
       "fit.epochs: must be a positive integer, got '99999999999' (line 3)"},
      {"fit: {epochs: [1]}\n", "fit.epochs: must be a positive integer, got a list (line 3)"},
      {"fit: {epochs: }\n", "fit.epochs: must be a positive integer, got nothing (line 3)"},
      {"fit: {seed: -1}\n", "fit.seed: must be an integer >= 0, got '-1' (line 3)"},
      {"fit: {shuffle: yes}\n", "fit.shuffle: must be true or false, got 'yes' (line 3)"},
      {"fit: {precision: float16}\n",
       "fit.precision: 'float16' is not supported; supported: float32, mixed_bfloat16 (line 3)"},
      {"fit: {precision: [bf16]}\n", "fit.precision: must be a string, got a list (line 3)"},
      {"fit: 3\n", "fit: must be a map of fields, got a value (line 3)"},
      {"fit: [epochs, 3]\n", "fit: must be a map of fields, got a list (line 3)"},
      {"data: 1\n", "data: set twice (lines 2 and 3)"},
      {"name: [a]\n", "name: must be a string, got a list (line 3)"},
      {"name: ''\n", "name: must not be empty (line 3)"},
      {"priority: high\n", "priority: must be an integer, got 'high' (line 3)"},
      {"trace: yes please\n", "trace: must be true or false, got 'yes please' (line 3)"},
      {"max_restarts: 1.0\n", "max_restarts: must be an integer >= 0, got '1.0' (line 3)"},
      {"resources: {device: gpu}\n",
       "resources.device: 'gpu' is not supported; supported: cpu, cuda (line 3)"},
      {"compile: {learning_rate: fast}\n",
       "compile.learning_rate: must be a positive number, got 'fast' (line 3)"},
      {"compile: {learning_rate: .inf}\n",
       "compile.learning_rate: must be a positive number, got '.inf' (line 3)"},
      {"compile: {learning_rate: nan}\n",
       "compile.learning_rate: must be a positive number, got 'nan' (line 3)"},
      {"compile: {optimizer: [adam]}\n",
       "compile.optimizer: must be an optimizer name or a map, got a list (line 3)"},
      {"compile: {loss: [mse]}\n",
       "compile.loss: must be a loss name or a map, got a list (line 3)"},
      {"compile: {metrics: accuracy}\n",
       "compile.metrics: must be a list of metric names, e.g. [accuracy], got 'accuracy' (line 3)"},
      {"compile: {metrics: [{name: mae}]}\n",
       "compile.metrics[0]: must be a string, got a map (line 3)"},
      {"compile: {optimizer: {name: sgd, nesterov: 1}}\n",
       "compile.optimizer.nesterov: must be true or false, got '1' (line 3)"},
  });
  const std::string long_value(500, 'z');
  CHECK(Error(std::string(kHead) + "fit: {epochs: " + long_value + "}\n") ==
        "fit.epochs: must be a positive integer, got '" + std::string(60, 'z') + "...' (line 3)");
}

TEST_CASE("names, paths and data", "[job]") {
  CheckAll({
      {"name: my job\n",
       "name: 'my job' is not a valid name (1-63 letters, digits, '.', '-', '_'; starting with a "
       "letter or digit) (line 3)"},
  });
  CHECK(Error("model: model.h5\ndata: {x: x.npy, y: y.npy}\n") ==
        "model: must be a .keras file or the .json of model.to_json(), got 'model.h5' (line 1)");
  CHECK(Error("model: ~/m.keras\ndata: {x: x.npy, y: y.npy}\n") ==
        "model: '~' is not expanded; write the full path, got '~/m.keras' (line 1)");
  CHECK(Error("model: m.keras\ndata: {x: x.csv, y: y.npy}\n") ==
        "data.x: must be a .npy file or {path: FILE.npz, key: ARRAY}, got '/jobs/x.csv' (line 2)");
  CHECK(Error("model: m\xff.keras\ndata: {x: x.npy, y: y.npy}\n") ==
        "model: must be valid UTF-8 (line 1)");
  CHECK(Error("model: m.keras\ndata: {x: \"a\\0b.npy\", y: y.npy}\n") ==
        "data.x: must not contain control characters (line 2)");
  CHECK(Error("model: m.keras\ndata: {x: {path: d.npz, key: \"\xed\xa0\x80\"}, y: y.npy}\n") ==
        "data.x.key: must be valid UTF-8 (line 2)");
  CHECK(Error("model: m.keras\ndata: {x: d.npz, y: y.npy}\n") ==
        "data.x: '/jobs/d.npz' is an .npz file: name its member with {path: FILE.npz, key: "
        "ARRAY} (line 2)");
  CHECK(Error("model: m.keras\ndata:\n  x: {path: x.npy, key: a}\n  y: y.npy\n") ==
        "data.x.key: only an .npz file has members (line 3)");
  CHECK(Error("model: m.keras\ndata:\n  x: {key: a}\n  y: y.npy\n") ==
        "data.x.path: required (in data.x, line 3)");
  CHECK(Error("model: m.keras\ndata:\n  x: {path: d.npz, kee: a}\n  y: y.npy\n") ==
        "data.x.kee: unknown field (did you mean 'key'?) (line 3)");
  CHECK(Error("model: m.keras\ndata:\n  x: x.npy\n  y: y.npy\n  validation_x: vx.npy\n") ==
        "data.validation_y: required with data.validation_x");
  CHECK(Error("model: m.keras\ndata:\n  x: x.npy\n  y: y.npy\n  validation_y: vy.npy\n") ==
        "data.validation_x: required with data.validation_y");
  CHECK(Error("model: m.keras\ndata:\n  x: x.npy\n  y: y.npy\n  validation_x: vx.npy\n"
              "  validation_y: vy.npy\n  validation_split: 0.1\n") ==
        "data.validation_split: cannot be combined with data.validation_x (line 7)");
  CHECK(Error("model: m.keras\ndata: {x: x.npy, y: y.npy, validation_split: 1}\n") ==
        "data.validation_split: must be in [0, 1), got 1 (line 2)");
  CHECK(Error("model: m.keras\ndata: {x: x.npy, y: y.npy, validation_split: -0.5}\n") ==
        "data.validation_split: must be in [0, 1), got -0.5 (line 2)");
}

TEST_CASE("ranges and the batch split across workers", "[job]") {
  CheckAll({
      {"fit: {epochs: 0}\n", "fit.epochs: must be a positive integer, got 0 (line 3)"},
      {"fit: {batch_size: -4}\n", "fit.batch_size: must be a positive integer, got -4 (line 3)"},
      {"resources: {workers: 0}\n",
       "resources.workers: must be a positive integer, got 0 (line 3)"},
      {"checkpoint: {every_epochs: -1}\n",
       "checkpoint.every_epochs: must be an integer >= 0, got -1 (line 3)"},
      {"checkpoint: {keep: 0}\n", "checkpoint.keep: must be a positive integer, got 0 (line 3)"},
      {"max_restarts: -1\n", "max_restarts: must be an integer >= 0, got -1 (line 3)"},
      {"fit:\n  batch_size: 100\nresources: {workers: 3}\n",
       "fit.batch_size: the global batch 100 is not divisible by resources.workers (3); every "
       "rank takes an equal slice of each batch (line 4)"},
      {"resources: {workers: 5}\n",
       "fit.batch_size: the global batch 32 is not divisible by resources.workers (5); every rank "
       "takes an equal slice of each batch"},
  });
}

TEST_CASE("compile section errors", "[job]") {
  CheckAll({
      {"compile: {optimizer: {name: adamax}}\n",
       "compile.optimizer.name: 'adamax' is not supported; supported: SGD, Adam, AdamW, RMSprop, "
       "Adagrad (line 3)"},
      {"compile: {optimizer: nadam}\n",
       "compile.optimizer: 'nadam' is not supported; supported: SGD, Adam, AdamW, RMSprop, "
       "Adagrad (line 3)"},
      {"compile: {optimizer: {name: adam, momentum: 0.9}}\n",
       "compile.optimizer.momentum: not an option of Adam (line 3)"},
      {"compile: {optimizer: {name: sgd, beta_1: 0.9}}\n",
       "compile.optimizer.beta_1: not an option of SGD (line 3)"},
      {"compile: {optimizer: {name: sgd, epsilon: 1e-7}}\n",
       "compile.optimizer.epsilon: not an option of SGD (line 3)"},
      {"compile: {optimizer: {name: adam, rho: 0.9}}\n",
       "compile.optimizer.rho: not an option of Adam (line 3)"},
      {"compile: {optimizer: {name: rmsprop, nesterov: true}}\n",
       "compile.optimizer.nesterov: not an option of RMSprop (line 3)"},
      {"compile: {optimizer: {name: sgd, initial_accumulator_value: 0.1}}\n",
       "compile.optimizer.initial_accumulator_value: not an option of SGD (line 3)"},
      {"compile: {optimizer: {name: sgd, momentum: 1.5}}\n",
       "compile.optimizer.momentum: must be in [0, 1], got 1.5 (line 3)"},
      {"compile: {optimizer: {name: adam, beta_2: 1}}\n",
       "compile.optimizer.beta_2: must be in [0, 1), got 1 (line 3)"},
      {"compile: {optimizer: {name: adamw, weight_decay: -0.1}}\n",
       "compile.optimizer.weight_decay: must be a number >= 0, got -0.1 (line 3)"},
      {"compile: {learning_rate: 0}\n",
       "compile.optimizer.learning_rate: must be a positive number, got 0 (line 3)"},
      {"compile: {optimizer: {name: adam, learning_rate: -1}}\n",
       "compile.optimizer.learning_rate: must be a positive number, got -1 (line 3)"},
      {"compile:\n  optimizer: {name: adam, learning_rate: 0.1}\n  learning_rate: 0.2\n",
       "compile.learning_rate: cannot be combined with compile.optimizer.learning_rate (line 5)"},
      {"compile: {optimizer: {name: adam, learning_rate: 0.1, schedule: {name: cosine_decay}}}\n",
       "compile.optimizer.schedule: cannot be combined with compile.optimizer.learning_rate "
       "(line 3)"},
      {"compile:\n  optimizer:\n    schedule: {name: cosine_decay, initial_learning_rate: 1, "
       "decay_steps: 2}\n  learning_rate: 0.2\n",
       "compile.learning_rate: cannot be combined with compile.optimizer.schedule (line 6)"},
      {"compile: {optimizer: {schedule: {name: linear}}}\n",
       "compile.optimizer.schedule.name: 'linear' is not supported; supported: "
       "exponential_decay, cosine_decay (line 3)"},
      {"compile: {optimizer: {schedule: {initial_learning_rate: 1}}}\n",
       "compile.optimizer.schedule.name: required (in compile.optimizer.schedule, line 3)"},
      {"compile:\n  optimizer:\n    schedule: {name: exponential_decay, initial_learning_rate: 1, "
       "decay_steps: 10}\n",
       "compile.optimizer.schedule.decay_rate: required (in compile.optimizer.schedule, line 5)"},
      {"compile: {optimizer: {schedule: {name: cosine_decay, decay_steps: 10}}}\n",
       "compile.optimizer.schedule.initial_learning_rate: required (in "
       "compile.optimizer.schedule, line 3)"},
      {"compile: {optimizer: {schedule: {name: cosine_decay, initial_learning_rate: 1, "
       "decay_steps: 10, staircase: true}}}\n",
       "compile.optimizer.schedule.staircase: not an option of cosine_decay (line 3)"},
      {"compile: {optimizer: {schedule: {name: exponential_decay, initial_learning_rate: 1, "
       "decay_steps: 10, decay_rate: 0.5, alpha: 0.1}}}\n",
       "compile.optimizer.schedule.alpha: not an option of exponential_decay (line 3)"},
      {"compile: {optimizer: {schedule: {name: cosine_decay, initial_learning_rate: 1, "
       "decay_steps: 0}}}\n",
       "compile.optimizer.schedule.decay_steps: must be a positive integer, got 0 (line 3)"},
      {"compile: {optimizer: {schedule: {name: cosine_decay, initial_learning_rate: 1, "
       "decay_steps: 5, alpha: 2}}}\n",
       "compile.optimizer.schedule.alpha: must be in [0, 1], got 2 (line 3)"},
      {"compile: {optimizer: {schedule: {name: exponential_decay, initial_learning_rate: 1, "
       "decay_steps: 5, decay_rate: 0}}}\n",
       "compile.optimizer.schedule.decay_rate: must be a positive number, got 0 (line 3)"},
      {"compile: {loss: crossentropy}\n",
       "compile.loss: 'crossentropy' is not supported; supported: "
       "sparse_categorical_crossentropy, SparseCategoricalCrossentropy, "
       "categorical_crossentropy, CategoricalCrossentropy, binary_crossentropy, "
       "BinaryCrossentropy, bce, BCE, mean_squared_error, MeanSquaredError, mse, MSE, "
       "mean_absolute_error, MeanAbsoluteError, mae, MAE, huber, Huber (line 3)"},
      {"compile: {loss: {from_logits: true}}\n",
       "compile.loss.name: required (in compile.loss, line 3)"},
      {"compile: {loss: {name: mse, from_logits: true}}\n",
       "compile.loss.from_logits: not an option of mean_squared_error (line 3)"},
      {"compile: {loss: {name: mae, delta: 2}}\n",
       "compile.loss.delta: not an option of mean_absolute_error (line 3)"},
      {"compile: {loss: {name: huber, delta: 0}}\n",
       "compile.loss.delta: must be a positive number, got 0 (line 3)"},
      {"compile: {loss: {name: huber, label_smoothing: 0.1}}\n",
       "compile.loss.label_smoothing: unknown field; known: name, from_logits, delta (line 3)"},
      {"compile:\n  metrics:\n    - accuracy\n    - f1_score\n",
       "compile.metrics[1]: 'f1_score' is not supported; supported: accuracy, acc, "
       "binary_accuracy, BinaryAccuracy, categorical_accuracy, CategoricalAccuracy, "
       "sparse_categorical_accuracy, SparseCategoricalAccuracy, mean_absolute_error, "
       "MeanAbsoluteError, mae, MAE, mean_squared_error, MeanSquaredError, mse, MSE (line 6)"},
      {"compile: {metrics: [mae, mae]}\n", "compile.metrics[1]: 'mae' is listed twice (line 3)"},
  });
}

}  // namespace
}  // namespace cohort::job
