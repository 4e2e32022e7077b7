#pragma once

// Training settings: the optimizer, loss and metrics of a Keras `compile_config` as
// typed values. ParseModelConfig fills ModelIr::compile from the file; the job spec
// builds the same structs from flags or YAML to override the file's settings. Every
// struct's member defaults, and the KerasDefault* functions, are Keras 3.15's defaults,
// so a struct built from a bare name ("adam") trains like Keras' compile("adam").
//
// Names are looked up as Keras looks them up (keras.optimizers.get lower-cases them;
// losses and metrics accept class names, function names and aliases such as "mse").
// Plain values, safe to copy and share between threads.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/keras/shape.h"

namespace cohort::keras {

// ---- Learning rate ----

// A constant rate or one of Keras' schedules, evaluated at the optimizer step.
//   ExponentialDecay: initial * decay_rate ^ (step / decay_steps), the exponent
//     floored when staircase.
//   CosineDecay: without warmup_target, s = min(step, decay_steps) and
//     initial * ((1 - alpha) * 0.5 * (1 + cos(pi * s / decay_steps)) + alpha); with a
//     warmup_target, a linear ramp from initial to warmup_target over warmup_steps,
//     then the cosine decay from warmup_target over decay_steps.
struct LearningRate {
  enum class Kind { kConstant, kExponentialDecay, kCosineDecay };
  Kind kind = Kind::kConstant;
  double initial = 0.001;   // the constant rate, or the schedule's initial_learning_rate
  int64_t decay_steps = 1;  // schedules
  double decay_rate = 1.0;  // ExponentialDecay
  bool staircase = false;   // ExponentialDecay
  double alpha = 0.0;       // CosineDecay
  std::optional<double> warmup_target;  // CosineDecay
  int64_t warmup_steps = 0;             // CosineDecay

  static LearningRate Constant(double rate) {
    LearningRate out;
    out.initial = rate;
    return out;
  }
  // The rate for the update that follows `step` earlier updates (Keras evaluates its
  // schedule at optimizer.iterations, 0 for the first update).
  double At(int64_t step) const;
};

// ---- Optimizer ----

enum class OptimizerKind { kSgd, kAdam, kAdamW, kRmsprop, kAdagrad };
absl::string_view OptimizerKindName(OptimizerKind kind);  // Keras' class name: "RMSprop"
// Case-insensitive, as keras.optimizers.get: "adam", "AdamW", "rmsprop", "SGD".
std::optional<OptimizerKind> OptimizerKindFromName(absl::string_view name);
// "SGD, Adam, AdamW, RMSprop, Adagrad" for error messages.
std::string SupportedOptimizerNames();

// One struct for all kinds; each field says which kinds read it. Keras applies weight
// decay decoupled, to every trainable variable, before the update:
// var -= var * weight_decay * learning_rate.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdam;
  LearningRate learning_rate;
  double weight_decay = 0.0;               // all kinds; 0 = none (Keras' None)
  std::optional<double> clipnorm;          // all kinds: per-variable gradient norm clip
  std::optional<double> global_clipnorm;   // all kinds: clip by the global norm
  std::optional<double> clipvalue;         // all kinds: element-wise clip; at most one set
  double momentum = 0.0;                   // SGD, RMSprop
  bool nesterov = false;                   // SGD
  double beta_1 = 0.9;                     // Adam, AdamW
  double beta_2 = 0.999;                   // Adam, AdamW
  bool amsgrad = false;                    // Adam, AdamW
  double epsilon = 1e-7;                   // Adam, AdamW, RMSprop, Adagrad (torch: 1e-8)
  double rho = 0.9;                        // RMSprop
  bool centered = false;                   // RMSprop
  double initial_accumulator_value = 0.1;  // Adagrad
};

// Keras' defaults for `kind`: learning rate 0.01 for SGD and 0.001 otherwise, weight
// decay 0.004 for AdamW and none otherwise.
OptimizerConfig KerasDefaultOptimizer(OptimizerKind kind);

// ---- Loss ----

enum class LossKind {
  kSparseCategoricalCrossentropy,  // integer labels, one per output row
  kCategoricalCrossentropy,        // one-hot (or soft) labels shaped like the output
  kBinaryCrossentropy,
  kMeanSquaredError,
  kMeanAbsoluteError,
  kHuber,
};
// Keras' function name: "sparse_categorical_crossentropy", "mean_squared_error", "huber".
absl::string_view LossKindName(LossKind kind);
// Class names ("MeanSquaredError"), function names ("mean_squared_error") and Keras'
// aliases ("mse", "MSE", "mae", "MAE", "bce", "BCE").
std::optional<LossKind> LossKindFromName(absl::string_view name);
std::string SupportedLossNames();

// The reduction is always Keras' sum_over_batch_size (the mean over the batch).
struct LossConfig {
  LossKind kind = LossKind::kMeanSquaredError;
  bool from_logits = false;      // the crossentropies
  double label_smoothing = 0.0;  // CategoricalCrossentropy, BinaryCrossentropy
  // Huber. Keras 3.15 does not write delta into the config of a Huber object, so a
  // reloaded Keras model uses 1.0 whatever it was compiled with; so does Cohort.
  double delta = 1.0;
};
LossConfig KerasDefaultLoss(LossKind kind);

// ---- Metrics ----

enum class MetricKind {
  // The string "accuracy" or "acc": Keras picks binary, sparse categorical or
  // categorical accuracy from the shapes of y and the output; see ResolveMetric.
  kAccuracy,
  kBinaryAccuracy,  // threshold
  kCategoricalAccuracy,
  kSparseCategoricalAccuracy,
  kExactAccuracy,  // keras.metrics.Accuracy: fraction of y_pred == y_true
  kMeanAbsoluteError,
  kMeanSquaredError,
};

struct MetricConfig {
  MetricKind kind = MetricKind::kAccuracy;
  std::string name;  // what Keras logs: the string given, or the object's name
  double threshold = 0.5;
};
// Keras' metric names: "accuracy"/"acc" (any case), class names, their snake_case,
// "mae", "mse", "mean_absolute_error", ... `name` is kept as the display name.
std::optional<MetricConfig> MetricFromName(absl::string_view name);
std::string SupportedMetricNames();

// Keras' rule for kAccuracy (trainers/compile_utils.py), on per-sample shapes: binary
// when the output's last dimension is 1; sparse categorical when y has lower rank than
// the output or y's last dimension is 1 and the output's is not; else categorical.
// Other kinds are returned as they are.
MetricConfig ResolveMetric(const MetricConfig& metric, const Shape& y_row, const Shape& output_row);

// ---- compile_config ----

struct CompileConfig {
  OptimizerConfig optimizer = KerasDefaultOptimizer(OptimizerKind::kRmsprop);
  std::optional<LossConfig> loss;  // nullopt: compiled without a loss
  double loss_weight = 1.0;        // Keras' loss_weights for the single output
  std::vector<MetricConfig> metrics;
};

// Reads the value of a `compile_config` entry as Keras 3.15 writes it (optimizer,
// loss and metrics as strings or serialized objects). Unknown fields are ignored;
// unsupported classes and options (use_ema, loss_scale_factor, several outputs, a
// reduction other than sum_over_batch_size, ...) are refused with InvalidArgument
// naming the field.
absl::StatusOr<CompileConfig> ParseCompileConfig(const nlohmann::json& compile_config);

}  // namespace cohort::keras
