#include "common/keras/compile_config.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/keras/json_reader.h"

namespace cohort::keras {
namespace {

using internal::Describe;
using internal::FieldReader;
using internal::Json;

constexpr std::pair<absl::string_view, OptimizerKind> kOptimizers[] = {
    {"SGD", OptimizerKind::kSgd},         {"Adam", OptimizerKind::kAdam},
    {"AdamW", OptimizerKind::kAdamW},     {"RMSprop", OptimizerKind::kRmsprop},
    {"Adagrad", OptimizerKind::kAdagrad},
};

constexpr std::pair<absl::string_view, LossKind> kLosses[] = {
    {"sparse_categorical_crossentropy", LossKind::kSparseCategoricalCrossentropy},
    {"SparseCategoricalCrossentropy", LossKind::kSparseCategoricalCrossentropy},
    {"categorical_crossentropy", LossKind::kCategoricalCrossentropy},
    {"CategoricalCrossentropy", LossKind::kCategoricalCrossentropy},
    {"binary_crossentropy", LossKind::kBinaryCrossentropy},
    {"BinaryCrossentropy", LossKind::kBinaryCrossentropy},
    {"bce", LossKind::kBinaryCrossentropy},
    {"BCE", LossKind::kBinaryCrossentropy},
    {"mean_squared_error", LossKind::kMeanSquaredError},
    {"MeanSquaredError", LossKind::kMeanSquaredError},
    {"mse", LossKind::kMeanSquaredError},
    {"MSE", LossKind::kMeanSquaredError},
    {"mean_absolute_error", LossKind::kMeanAbsoluteError},
    {"MeanAbsoluteError", LossKind::kMeanAbsoluteError},
    {"mae", LossKind::kMeanAbsoluteError},
    {"MAE", LossKind::kMeanAbsoluteError},
    {"huber", LossKind::kHuber},
    {"Huber", LossKind::kHuber},
};

constexpr std::pair<absl::string_view, MetricKind> kMetrics[] = {
    {"binary_accuracy", MetricKind::kBinaryAccuracy},
    {"BinaryAccuracy", MetricKind::kBinaryAccuracy},
    {"categorical_accuracy", MetricKind::kCategoricalAccuracy},
    {"CategoricalAccuracy", MetricKind::kCategoricalAccuracy},
    {"sparse_categorical_accuracy", MetricKind::kSparseCategoricalAccuracy},
    {"SparseCategoricalAccuracy", MetricKind::kSparseCategoricalAccuracy},
    {"mean_absolute_error", MetricKind::kMeanAbsoluteError},
    {"MeanAbsoluteError", MetricKind::kMeanAbsoluteError},
    {"mae", MetricKind::kMeanAbsoluteError},
    {"MAE", MetricKind::kMeanAbsoluteError},
    {"mean_squared_error", MetricKind::kMeanSquaredError},
    {"MeanSquaredError", MetricKind::kMeanSquaredError},
    {"mse", MetricKind::kMeanSquaredError},
    {"MSE", MetricKind::kMeanSquaredError},
};

template <typename Table>
std::string Names(const Table& table) {
  std::string out;
  for (const auto& entry : table) absl::StrAppend(&out, out.empty() ? "" : ", ", entry.first);
  return out;
}

MetricConfig MakeMetric(MetricKind kind, absl::string_view name) {
  MetricConfig out;
  out.kind = kind;
  out.name = std::string(name);
  return out;
}

// A serialized object's class name and config, or a bare name (config then null).
struct KerasObject {
  std::string name;
  const Json* config = nullptr;
  bool is_function = false;  // {"class_name": "function", "config": "<name>"}
};

absl::StatusOr<KerasObject> ReadObject(const Json& value, const FieldReader& where,
                                       absl::string_view what) {
  if (value.is_string()) return KerasObject{value.get<std::string>()};
  if (!value.is_object()) {
    return where.Error(
        absl::StrCat(what, " must be a name or a serialized object, got ", Describe(value)));
  }
  FieldReader obj(value, where.context());
  COHORT_ASSIGN_OR_RETURN(std::string class_name, obj.String("class_name"));
  const Json* config = obj.Find("config");
  if (class_name == "function") {
    if (config == nullptr || !config->is_string()) {
      return where.Error(absl::StrCat(what, " is a function without a name"));
    }
    return KerasObject{config->get<std::string>(), nullptr, true};
  }
  if (const Json* registered = obj.Find("registered_name");
      registered != nullptr && !(registered->is_string() && *registered == class_name)) {
    return where.Error(absl::StrCat(what, " is a custom class, which Cohort does not support"));
  }
  if (config != nullptr && !config->is_object()) {
    return where.Error(absl::StrCat(what, " ", class_name, " has a config that is not an object"));
  }
  return KerasObject{class_name, config};
}

const Json& ConfigOf(const KerasObject& object) {
  static const Json kEmpty = Json::object();
  return object.config != nullptr ? *object.config : kEmpty;
}

absl::StatusOr<LearningRate> ReadLearningRate(const FieldReader& config, double fallback) {
  const Json* value = config.Find("learning_rate");
  if (value == nullptr) return LearningRate::Constant(fallback);
  if (value->is_number()) {
    double rate = value->get<double>();
    if (!(rate >= 0)) return config.Error("learning_rate must not be negative");
    return LearningRate::Constant(rate);
  }
  COHORT_ASSIGN_OR_RETURN(KerasObject schedule, ReadObject(*value, config, "learning_rate"));
  FieldReader s(ConfigOf(schedule),
                absl::StrCat(config.context(), ": learning_rate ", schedule.name));
  LearningRate out;
  if (schedule.name == "ExponentialDecay") {
    out.kind = LearningRate::Kind::kExponentialDecay;
    COHORT_ASSIGN_OR_RETURN(out.decay_rate, s.Double("decay_rate"));
    COHORT_ASSIGN_OR_RETURN(out.staircase, s.Bool("staircase", false));
  } else if (schedule.name == "CosineDecay") {
    out.kind = LearningRate::Kind::kCosineDecay;
    COHORT_ASSIGN_OR_RETURN(out.alpha, s.Double("alpha", 0.0));
    COHORT_ASSIGN_OR_RETURN(out.warmup_target, s.OptionalDouble("warmup_target"));
    COHORT_ASSIGN_OR_RETURN(out.warmup_steps, s.Int("warmup_steps", 0));
    if (out.warmup_steps < 0) return s.Error("warmup_steps must not be negative");
  } else {
    return config.Error(
        absl::StrCat("learning_rate schedule ", schedule.name,
                     " is not supported; supported: ExponentialDecay, CosineDecay"));
  }
  COHORT_ASSIGN_OR_RETURN(out.initial, s.Double("initial_learning_rate"));
  COHORT_ASSIGN_OR_RETURN(out.decay_steps, s.Int("decay_steps"));
  if (out.decay_steps < 1) return s.Error("decay_steps must be at least 1");
  return out;
}

absl::StatusOr<OptimizerConfig> ReadOptimizer(const FieldReader& compile) {
  const Json* value = compile.Find("optimizer");
  if (value == nullptr) return KerasDefaultOptimizer(OptimizerKind::kRmsprop);
  COHORT_ASSIGN_OR_RETURN(KerasObject object, ReadObject(*value, compile, "optimizer"));
  std::optional<OptimizerKind> kind = OptimizerKindFromName(object.name);
  if (!kind || object.is_function) {
    return compile.Error(absl::StrCat("optimizer ", object.name,
                                      " is not supported; supported: ", SupportedOptimizerNames()));
  }
  OptimizerConfig out = KerasDefaultOptimizer(*kind);
  FieldReader c(ConfigOf(object),
                absl::StrCat(compile.context(), ": optimizer ", OptimizerKindName(*kind)));
  COHORT_ASSIGN_OR_RETURN(out.learning_rate, ReadLearningRate(c, out.learning_rate.initial));
  COHORT_ASSIGN_OR_RETURN(std::optional<double> weight_decay, c.OptionalDouble("weight_decay"));
  if (weight_decay) out.weight_decay = *weight_decay;
  COHORT_ASSIGN_OR_RETURN(out.clipnorm, c.OptionalDouble("clipnorm"));
  COHORT_ASSIGN_OR_RETURN(out.global_clipnorm, c.OptionalDouble("global_clipnorm"));
  COHORT_ASSIGN_OR_RETURN(out.clipvalue, c.OptionalDouble("clipvalue"));
  if (out.clipnorm.has_value() + out.global_clipnorm.has_value() + out.clipvalue.has_value() > 1) {
    return c.Error("only one of clipnorm, global_clipnorm and clipvalue may be set");
  }
  COHORT_ASSIGN_OR_RETURN(bool use_ema, c.Bool("use_ema", false));
  if (use_ema) return c.Error("use_ema=True is not supported");
  COHORT_RETURN_IF_ERROR(c.RequireNull("loss_scale_factor", "loss scaling"));
  COHORT_ASSIGN_OR_RETURN(int64_t accumulation, c.Int("gradient_accumulation_steps", 1));
  if (accumulation != 1) return c.Error("gradient_accumulation_steps is not supported");
  switch (*kind) {
    case OptimizerKind::kSgd: {
      COHORT_ASSIGN_OR_RETURN(out.momentum, c.Double("momentum", out.momentum));
      COHORT_ASSIGN_OR_RETURN(out.nesterov, c.Bool("nesterov", out.nesterov));
      break;
    }
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW: {
      COHORT_ASSIGN_OR_RETURN(out.beta_1, c.Double("beta_1", out.beta_1));
      COHORT_ASSIGN_OR_RETURN(out.beta_2, c.Double("beta_2", out.beta_2));
      COHORT_ASSIGN_OR_RETURN(out.epsilon, c.Double("epsilon", out.epsilon));
      COHORT_ASSIGN_OR_RETURN(out.amsgrad, c.Bool("amsgrad", out.amsgrad));
      break;
    }
    case OptimizerKind::kRmsprop: {
      COHORT_ASSIGN_OR_RETURN(out.rho, c.Double("rho", out.rho));
      COHORT_ASSIGN_OR_RETURN(out.momentum, c.Double("momentum", out.momentum));
      COHORT_ASSIGN_OR_RETURN(out.epsilon, c.Double("epsilon", out.epsilon));
      COHORT_ASSIGN_OR_RETURN(out.centered, c.Bool("centered", out.centered));
      break;
    }
    case OptimizerKind::kAdagrad: {
      COHORT_ASSIGN_OR_RETURN(out.initial_accumulator_value,
                             c.Double("initial_accumulator_value", out.initial_accumulator_value));
      COHORT_ASSIGN_OR_RETURN(out.epsilon, c.Double("epsilon", out.epsilon));
      break;
    }
  }
  return out;
}

absl::StatusOr<std::optional<LossConfig>> ReadLoss(const FieldReader& compile) {
  const Json* value = compile.Find("loss");
  bool per_output = value != nullptr && ((value->is_array() && value->size() != 1) ||
                                         (value->is_object() && !value->contains("class_name")));
  if (per_output) return compile.Error("a loss per output (several outputs) is not supported");
  if (value != nullptr && value->is_array()) {
    value = &(*value)[0];
    if (value->is_null()) return std::optional<LossConfig>();
  }
  if (value == nullptr) return std::optional<LossConfig>();
  COHORT_ASSIGN_OR_RETURN(KerasObject object, ReadObject(*value, compile, "loss"));
  std::optional<LossKind> kind = LossKindFromName(object.name);
  if (!kind) {
    return compile.Error(
        absl::StrCat("loss ", object.name, " is not supported; supported: ", SupportedLossNames()));
  }
  LossConfig out = KerasDefaultLoss(*kind);
  FieldReader c(ConfigOf(object), absl::StrCat(compile.context(), ": loss ", object.name));
  COHORT_ASSIGN_OR_RETURN(std::string reduction, c.String("reduction", "sum_over_batch_size"));
  if (reduction != "sum_over_batch_size") {
    return c.Error(
        absl::StrCat("reduction '", reduction, "' is not supported (only sum_over_batch_size)"));
  }
  COHORT_ASSIGN_OR_RETURN(out.from_logits, c.Bool("from_logits", false));
  COHORT_ASSIGN_OR_RETURN(out.label_smoothing, c.Double("label_smoothing", 0.0));
  if (out.label_smoothing < 0 || out.label_smoothing > 1) {
    return c.Error("label_smoothing must be in [0, 1]");
  }
  COHORT_ASSIGN_OR_RETURN(out.delta, c.Double("delta", 1.0));
  COHORT_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", -1));
  if (axis != -1) return c.Error("an axis other than -1 is not supported");
  COHORT_RETURN_IF_ERROR(c.RequireNull("ignore_class", "ignored classes"));
  return std::optional<LossConfig>(out);
}

absl::StatusOr<double> ReadLossWeight(const FieldReader& compile) {
  const Json* value = compile.Find("loss_weights");
  if (value == nullptr) return 1.0;
  if (value->is_array() && value->size() == 1) value = &(*value)[0];
  if (!value->is_number()) {
    return compile.Error(absl::StrCat("loss_weights must be one number for the single output, got ",
                                      Describe(*value)));
  }
  return value->get<double>();
}

absl::StatusOr<MetricConfig> ReadMetric(const Json& value, const FieldReader& compile) {
  COHORT_ASSIGN_OR_RETURN(KerasObject object, ReadObject(value, compile, "metric"));
  std::optional<MetricConfig> metric;
  if (value.is_object() && !object.is_function && object.name == "Accuracy") {
    metric = MakeMetric(MetricKind::kExactAccuracy, "accuracy");
  } else {
    metric = MetricFromName(object.name);
  }
  if (!metric) {
    return compile.Error(absl::StrCat("metric ", object.name,
                                      " is not supported; supported: ", SupportedMetricNames()));
  }
  if (object.config != nullptr) {
    FieldReader c(*object.config, absl::StrCat(compile.context(), ": metric ", object.name));
    COHORT_ASSIGN_OR_RETURN(metric->name, c.String("name", metric->name));
    COHORT_ASSIGN_OR_RETURN(metric->threshold, c.Double("threshold", 0.5));
  }
  return *metric;
}

absl::StatusOr<std::vector<MetricConfig>> ReadMetrics(const FieldReader& compile) {
  COHORT_RETURN_IF_ERROR(compile.RequireNull("weighted_metrics", "weighted metrics"));
  const Json* value = compile.Find("metrics");
  std::vector<MetricConfig> out;
  if (value == nullptr) return out;
  if (value->is_array() && value->size() == 1 && (*value)[0].is_array()) value = &(*value)[0];
  if (!value->is_array()) {
    return compile.Error(absl::StrCat("metrics must be a list, got ", Describe(*value)));
  }
  for (const Json& m : *value) {
    if (m.is_array())
      return compile.Error("metrics per output (several outputs) are not supported");
    COHORT_ASSIGN_OR_RETURN(MetricConfig metric, ReadMetric(m, compile));
    out.push_back(std::move(metric));
  }
  return out;
}

}  // namespace

double LearningRate::At(int64_t step) const {
  double s = static_cast<double>(step);
  switch (kind) {
    case Kind::kConstant:
      return initial;
    case Kind::kExponentialDecay: {
      double p = s / static_cast<double>(decay_steps);
      if (staircase) p = std::floor(p);
      return initial * std::pow(decay_rate, p);
    }
    case Kind::kCosineDecay: {
      double decay = static_cast<double>(decay_steps);
      auto cosine = [&](double at, double from) {
        double decayed = 0.5 * (1.0 + std::cos(std::numbers::pi * at / decay));
        return from * ((1 - alpha) * decayed + alpha);
      };
      if (!warmup_target) return cosine(std::min(s, decay), initial);
      double warmup = static_cast<double>(warmup_steps);
      s = std::min(s, decay + warmup);
      if (s < warmup) return (*warmup_target - initial) * (s / warmup) + initial;
      return cosine(s - warmup, *warmup_target);
    }
  }
  return initial;
}

absl::string_view OptimizerKindName(OptimizerKind kind) {
  for (const auto& [name, k] : kOptimizers) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<OptimizerKind> OptimizerKindFromName(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  for (const auto& [n, kind] : kOptimizers) {
    if (absl::AsciiStrToLower(n) == lower) return kind;
  }
  return std::nullopt;
}

std::string SupportedOptimizerNames() { return Names(kOptimizers); }

OptimizerConfig KerasDefaultOptimizer(OptimizerKind kind) {
  OptimizerConfig out;
  out.kind = kind;
  out.learning_rate = LearningRate::Constant(kind == OptimizerKind::kSgd ? 0.01 : 0.001);
  if (kind == OptimizerKind::kAdamW) out.weight_decay = 0.004;
  return out;
}

absl::string_view LossKindName(LossKind kind) {
  for (const auto& [name, k] : kLosses) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<LossKind> LossKindFromName(absl::string_view name) {
  for (const auto& [n, kind] : kLosses) {
    if (n == name) return kind;
  }
  return std::nullopt;
}

std::string SupportedLossNames() { return Names(kLosses); }

LossConfig KerasDefaultLoss(LossKind kind) {
  LossConfig out;
  out.kind = kind;
  return out;
}

std::optional<MetricConfig> MetricFromName(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  if (lower == "accuracy" || lower == "acc") {
    return MakeMetric(MetricKind::kAccuracy, name);
  }
  for (const auto& [n, kind] : kMetrics) {
    if (n == name) return MakeMetric(kind, name);
  }
  return std::nullopt;
}

std::string SupportedMetricNames() { return absl::StrCat("accuracy, acc, ", Names(kMetrics)); }

MetricConfig ResolveMetric(const MetricConfig& metric, const Shape& y_row,
                           const Shape& output_row) {
  if (metric.kind != MetricKind::kAccuracy) return metric;
  // compile_utils.is_binary_or_sparse_categorical, on shapes with the batch dimension.
  size_t y_rank = y_row.size() + 1;
  size_t out_rank = output_row.size() + 1;
  int64_t y_last = y_row.empty() ? kUnknownDim : y_row.back();
  int64_t out_last = output_row.empty() ? kUnknownDim : output_row.back();
  MetricConfig out = metric;
  if (out_last == 1) {
    out.kind = MetricKind::kBinaryAccuracy;
  } else if (y_rank < out_rank || (y_last == 1 && out_last > 1)) {
    out.kind = MetricKind::kSparseCategoricalAccuracy;
  } else {
    out.kind = MetricKind::kCategoricalAccuracy;
  }
  return out;
}

absl::StatusOr<CompileConfig> ParseCompileConfig(const Json& compile_config) {
  if (!compile_config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("compile_config must be an object, got ", Describe(compile_config)));
  }
  FieldReader compile(compile_config, "compile_config");
  CompileConfig out;
  COHORT_ASSIGN_OR_RETURN(out.optimizer, ReadOptimizer(compile));
  COHORT_ASSIGN_OR_RETURN(out.loss, ReadLoss(compile));
  COHORT_ASSIGN_OR_RETURN(out.loss_weight, ReadLossWeight(compile));
  COHORT_ASSIGN_OR_RETURN(out.metrics, ReadMetrics(compile));
  return out;
}

}  // namespace cohort::keras
