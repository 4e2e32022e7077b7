#include "common/job/compile_overrides.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace cohort::job {
namespace {

using keras::LearningRate;
using keras::LossKind;
using keras::OptimizerKind;

// Fails with "<field>: must be <what>, got <value>" unless ok(value); NaN never passes
// because every `ok` is written as a conjunction of comparisons.
template <typename T, typename Ok>
absl::Status Check(const FieldLines& lines, absl::string_view field, const std::optional<T>& value,
                   Ok ok, absl::string_view what) {
  if (!value.has_value() || ok(*value)) return absl::OkStatus();
  return FieldError(lines, field, absl::StrCat("must be ", what, ", got ", FormatNumber(*value)));
}

bool Positive(double v) { return v > 0 && v < std::numeric_limits<double>::infinity(); }
bool NonNegative(double v) { return v >= 0 && v < std::numeric_limits<double>::infinity(); }
bool UnitClosed(double v) { return v >= 0 && v <= 1; }
bool UnitHalfOpen(double v) { return v >= 0 && v < 1; }

absl::Status ValidateLearningRate(const LearningRate& rate, const FieldLines& lines) {
  if (rate.kind == LearningRate::Kind::kConstant) {
    return Check<double>(lines, "compile.optimizer.learning_rate", rate.initial, Positive,
                         "a positive number");
  }
  const std::string s = "compile.optimizer.schedule";
  if (rate.warmup_target.has_value() || rate.warmup_steps != 0) {
    return FieldError(lines, s, "a warmup cannot be set in a job spec");
  }
  absl::Status status = Check<double>(lines, s + ".initial_learning_rate", rate.initial, Positive,
                                      "a positive number");
  if (!status.ok()) return status;
  status = Check<double>(
      lines, s + ".decay_steps", static_cast<double>(rate.decay_steps),
      [](double v) { return v >= 1; }, "a positive integer");
  if (!status.ok()) return status;
  if (rate.kind == LearningRate::Kind::kExponentialDecay) {
    return Check<double>(lines, s + ".decay_rate", rate.decay_rate, Positive, "a positive number");
  }
  return Check<double>(lines, s + ".alpha", rate.alpha, UnitClosed, "in [0, 1]");
}

// The options set in `o` that `kind` does not have.
absl::Status CheckOptionsApply(const OptimizerOverrides& o, OptimizerKind kind,
                               const FieldLines& lines) {
  const bool sgd = kind == OptimizerKind::kSgd;
  const bool adam = kind == OptimizerKind::kAdam || kind == OptimizerKind::kAdamW;
  const bool rmsprop = kind == OptimizerKind::kRmsprop;
  const bool adagrad = kind == OptimizerKind::kAdagrad;
  const struct {
    absl::string_view name;
    bool set;
    bool applies;
  } options[] = {
      {"momentum", o.momentum.has_value(), sgd || rmsprop},
      {"nesterov", o.nesterov.has_value(), sgd},
      {"beta_1", o.beta_1.has_value(), adam},
      {"beta_2", o.beta_2.has_value(), adam},
      {"epsilon", o.epsilon.has_value(), !sgd},
      {"rho", o.rho.has_value(), rmsprop},
      {"initial_accumulator_value", o.initial_accumulator_value.has_value(), adagrad},
  };
  for (const auto& option : options) {
    if (option.set && !option.applies) {
      return FieldError(lines, absl::StrCat("compile.optimizer.", option.name),
                        absl::StrCat("not an option of ", keras::OptimizerKindName(kind)));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateOptimizer(const OptimizerOverrides& o, const FieldLines& lines) {
  const std::string p = "compile.optimizer.";
  absl::Status status = absl::OkStatus();
  if (o.learning_rate.has_value()) status.Update(ValidateLearningRate(*o.learning_rate, lines));
  status.Update(Check(lines, p + "weight_decay", o.weight_decay, NonNegative, "a number >= 0"));
  status.Update(Check(lines, p + "momentum", o.momentum, UnitClosed, "in [0, 1]"));
  status.Update(Check(lines, p + "beta_1", o.beta_1, UnitHalfOpen, "in [0, 1)"));
  status.Update(Check(lines, p + "beta_2", o.beta_2, UnitHalfOpen, "in [0, 1)"));
  status.Update(Check(lines, p + "epsilon", o.epsilon, NonNegative, "a number >= 0"));
  status.Update(Check(lines, p + "rho", o.rho, UnitHalfOpen, "in [0, 1)"));
  status.Update(Check(lines, p + "initial_accumulator_value", o.initial_accumulator_value,
                      NonNegative, "a number >= 0"));
  if (status.ok() && o.kind.has_value()) status = CheckOptionsApply(o, *o.kind, lines);
  return status;
}

absl::Status ValidateLoss(const keras::LossConfig& loss, const FieldLines& lines) {
  const bool crossentropy = loss.kind == LossKind::kSparseCategoricalCrossentropy ||
                            loss.kind == LossKind::kCategoricalCrossentropy ||
                            loss.kind == LossKind::kBinaryCrossentropy;
  const std::string not_an_option = absl::StrCat("not an option of ", LossKindName(loss.kind));
  if (loss.from_logits && !crossentropy) {
    return FieldError(lines, "compile.loss.from_logits", not_an_option);
  }
  if (loss.kind != LossKind::kHuber && loss.delta != keras::KerasDefaultLoss(loss.kind).delta) {
    return FieldError(lines, "compile.loss.delta", not_an_option);
  }
  if (loss.label_smoothing != 0) {
    return FieldError(lines, "compile.loss.label_smoothing", "cannot be set in a job spec");
  }
  return Check<double>(lines, "compile.loss.delta", loss.delta, Positive, "a positive number");
}

absl::Status ValidateMetrics(const std::vector<keras::MetricConfig>& metrics,
                             const FieldLines& lines) {
  for (size_t i = 0; i < metrics.size(); ++i) {
    const std::string field = absl::StrCat("compile.metrics[", i, "]");
    const keras::MetricConfig& metric = metrics[i];
    std::optional<keras::MetricConfig> named = keras::MetricFromName(metric.name);
    if (!named.has_value() || named->kind != metric.kind || named->threshold != metric.threshold) {
      return FieldError(lines, field,
                        absl::StrCat("'", metric.name, "' is not the name of this metric"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (metrics[j].name == metric.name) {
        return FieldError(lines, field, absl::StrCat("'", metric.name, "' is listed twice"));
      }
    }
  }
  return absl::OkStatus();
}

void ApplyOptimizer(const OptimizerOverrides& o, keras::OptimizerConfig& out) {
  if (o.kind.has_value()) out = keras::KerasDefaultOptimizer(*o.kind);
  if (o.learning_rate.has_value()) out.learning_rate = *o.learning_rate;
  if (o.weight_decay.has_value()) out.weight_decay = *o.weight_decay;
  if (o.momentum.has_value()) out.momentum = *o.momentum;
  if (o.nesterov.has_value()) out.nesterov = *o.nesterov;
  if (o.beta_1.has_value()) out.beta_1 = *o.beta_1;
  if (o.beta_2.has_value()) out.beta_2 = *o.beta_2;
  if (o.epsilon.has_value()) out.epsilon = *o.epsilon;
  if (o.rho.has_value()) out.rho = *o.rho;
  if (o.initial_accumulator_value.has_value()) {
    out.initial_accumulator_value = *o.initial_accumulator_value;
  }
}

bool SameRate(const LearningRate& a, const LearningRate& b) {
  return a.kind == b.kind && a.initial == b.initial && a.decay_steps == b.decay_steps &&
         a.decay_rate == b.decay_rate && a.staircase == b.staircase && a.alpha == b.alpha &&
         a.warmup_target == b.warmup_target && a.warmup_steps == b.warmup_steps;
}

bool SameLoss(const keras::LossConfig& a, const keras::LossConfig& b) {
  return a.kind == b.kind && a.from_logits == b.from_logits &&
         a.label_smoothing == b.label_smoothing && a.delta == b.delta;
}

bool SameMetric(const keras::MetricConfig& a, const keras::MetricConfig& b) {
  return a.kind == b.kind && a.name == b.name && a.threshold == b.threshold;
}

// Equal when both are unset or both are set to equal values.
template <typename T, typename Same>
bool SameOptional(const std::optional<T>& a, const std::optional<T>& b, Same same) {
  return a.has_value() == b.has_value() && (!a.has_value() || same(*a, *b));
}

}  // namespace

bool OptimizerOverrides::operator==(const OptimizerOverrides& other) const {
  return kind == other.kind && SameOptional(learning_rate, other.learning_rate, SameRate) &&
         weight_decay == other.weight_decay && momentum == other.momentum &&
         nesterov == other.nesterov && beta_1 == other.beta_1 && beta_2 == other.beta_2 &&
         epsilon == other.epsilon && rho == other.rho &&
         initial_accumulator_value == other.initial_accumulator_value;
}

bool CompileOverrides::operator==(const CompileOverrides& other) const {
  return optimizer == other.optimizer && SameOptional(loss, other.loss, SameLoss) &&
         std::equal(metrics.begin(), metrics.end(), other.metrics.begin(), other.metrics.end(),
                    SameMetric);
}

absl::Status ValidateCompileOverrides(const CompileOverrides& overrides, const FieldLines& lines) {
  absl::Status status = ValidateOptimizer(overrides.optimizer, lines);
  if (status.ok() && overrides.loss.has_value()) status = ValidateLoss(*overrides.loss, lines);
  if (status.ok()) status = ValidateMetrics(overrides.metrics, lines);
  return status;
}

absl::StatusOr<keras::CompileConfig> ResolveCompile(
    const std::optional<keras::CompileConfig>& from_model, const CompileOverrides& from_job) {
  absl::Status status = ValidateCompileOverrides(from_job);
  if (!status.ok()) return status;
  keras::CompileConfig out = from_model.value_or(keras::CompileConfig{});
  ApplyOptimizer(from_job.optimizer, out.optimizer);
  status = CheckOptionsApply(from_job.optimizer, out.optimizer.kind, {});
  if (!status.ok()) return status;
  if (from_job.loss.has_value()) {
    out.loss = *from_job.loss;
    out.loss_weight = 1.0;
  }
  if (!out.loss.has_value()) {
    return absl::InvalidArgumentError(
        from_model.has_value()
            ? "compile.loss: not set and the model file's compile_config has no loss"
            : "compile.loss: not set and the model file has no compile_config");
  }
  if (!from_job.metrics.empty()) out.metrics = from_job.metrics;
  return out;
}

}  // namespace cohort::job
