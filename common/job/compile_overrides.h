#pragma once

// The `compile` section of a job spec: training settings that override those of the
// model file's compile_config, field by field, and ResolveCompile, which merges the
// two into the keras::CompileConfig the trainer uses. The same fields as the proto
// message cohort.v1.CompileSpec, so the coordinator converts one to the other
// one-to-one. Plain values, safe to copy and share between threads.
//
// Merge rules (docs/job-spec.md):
//   optimizer  kind set: the model's optimizer is replaced by Keras' defaults for that
//              kind (as compile("adam") would), then the fields set here apply.
//              kind unset: the fields set here change the model's optimizer (or Keras'
//              compile() default, RMSprop, when the model has no compile_config).
//   loss       set: replaces the model's loss (and its loss weight, which becomes 1).
//   metrics    non-empty: replace the model's metrics.
// "accuracy" stays keras::MetricKind::kAccuracy: the trainer resolves it against the
// shapes of y and the output with keras::ResolveMetric, as Keras 3 does.

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/job/field_error.h"
#include "common/keras/compile_config.h"

namespace cohort::job {

// Every field is optional: unset means "as the model file (or Keras) has it".
struct OptimizerOverrides {
  std::optional<keras::OptimizerKind> kind;
  // A constant rate or a schedule (ExponentialDecay, CosineDecay without warmup).
  std::optional<keras::LearningRate> learning_rate;
  std::optional<double> weight_decay;               // all kinds
  std::optional<double> momentum;                   // SGD, RMSprop
  std::optional<bool> nesterov;                     // SGD
  std::optional<double> beta_1;                     // Adam, AdamW
  std::optional<double> beta_2;                     // Adam, AdamW
  std::optional<double> epsilon;                    // Adam, AdamW, RMSprop, Adagrad
  std::optional<double> rho;                        // RMSprop
  std::optional<double> initial_accumulator_value;  // Adagrad

  // Field by field (the keras structs have no operator== of their own).
  bool operator==(const OptimizerOverrides& other) const;
};

struct CompileOverrides {
  OptimizerOverrides optimizer;
  // A job sets kind, from_logits (the crossentropies) and delta (Huber); the other
  // fields keep their Keras defaults (label_smoothing 0).
  std::optional<keras::LossConfig> loss;
  // Keras' metric names as the user wrote them ("accuracy", "mae"); empty: the model
  // file's metrics.
  std::vector<keras::MetricConfig> metrics;

  bool operator==(const CompileOverrides& other) const;
};

// OK, or INVALID_ARGUMENT naming the field ("compile.optimizer.momentum: must be in
// [0, 1], got 1.5"; "compile.optimizer.beta_1: not an option of SGD"). Options are
// checked against the kind when it is set; ResolveCompile checks them against the
// final one. `lines` adds the YAML line to messages (see field_error.h).
absl::Status ValidateCompileOverrides(const CompileOverrides& overrides,
                                      const FieldLines& lines = {});

// The compile settings a job trains with: `from_job` merged over `from_model` (the
// model file's compile_config, nullopt when it was saved uncompiled), with Keras'
// defaults for everything neither sets. INVALID_ARGUMENT when the overrides are
// invalid, when an option does not apply to the final optimizer, or when neither
// names a loss ("compile.loss: not set and the model file has no compile_config").
absl::StatusOr<keras::CompileConfig> ResolveCompile(
    const std::optional<keras::CompileConfig>& from_model, const CompileOverrides& from_job);

}  // namespace cohort::job
