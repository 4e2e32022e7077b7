#include "common/job/compile_yaml.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "common/job/yaml_fields.h"

namespace cohort::job {
namespace {

using keras::LearningRate;

constexpr absl::string_view kPositiveNumber = "a positive number";
constexpr absl::string_view kNumber = "a number";

absl::Status NotSupported(const FieldLines& lines, absl::string_view field, absl::string_view name,
                          absl::string_view supported) {
  return FieldError(lines, field,
                    absl::StrCat("'", name, "' is not supported; supported: ", supported));
}

// Reads `key` of `map` into `out` when present.
template <typename Read>
absl::Status Optional(const YamlMap& map, absl::string_view key, Read read) {
  std::optional<YAML::Node> node = map.Get(key);
  if (!node.has_value()) return absl::OkStatus();
  return read(*node, map.Field(key));
}

absl::StatusOr<LearningRate> ParseSchedule(const YAML::Node& node, FieldLines& lines) {
  const std::string s = "compile.optimizer.schedule";
  COHORT_ASSIGN_OR_RETURN(YamlMap map, YamlMap::Read(node, s,
                                                  {"name", "initial_learning_rate", "decay_steps",
                                                   "decay_rate", "staircase", "alpha"},
                                                  lines));
  std::optional<YAML::Node> name_node = map.Get("name");
  if (!name_node.has_value()) return map.Missing("name", lines);
  COHORT_ASSIGN_OR_RETURN(std::string name, ReadString(*name_node, s + ".name", lines));
  // Keras' class names and their snake_case: ExponentialDecay, exponential_decay.
  const std::string normalized = absl::StrReplaceAll(absl::AsciiStrToLower(name), {{"_", ""}});
  LearningRate out;
  std::vector<absl::string_view> other_options;  // the other schedule's
  if (normalized == "exponentialdecay") {
    out.kind = LearningRate::Kind::kExponentialDecay;
    other_options = {"alpha"};
  } else if (normalized == "cosinedecay") {
    out.kind = LearningRate::Kind::kCosineDecay;
    other_options = {"decay_rate", "staircase"};
  } else {
    return NotSupported(lines, s + ".name", name, "exponential_decay, cosine_decay");
  }
  for (absl::string_view option : other_options) {
    if (map.Get(option).has_value()) {
      return FieldError(lines, map.Field(option), absl::StrCat("not an option of ", name));
    }
  }
  const bool exponential = out.kind == LearningRate::Kind::kExponentialDecay;
  for (absl::string_view required : {"initial_learning_rate", "decay_steps", "decay_rate"}) {
    if (required == "decay_rate" && !exponential) break;
    if (!map.Get(required).has_value()) return map.Missing(required, lines);
  }
  COHORT_RETURN_IF_ERROR(Optional(map, "initial_learning_rate", [&](auto& n, auto f) {
    COHORT_ASSIGN_OR_RETURN(out.initial, ReadNumber(n, f, lines, kPositiveNumber));
    return absl::OkStatus();
  }));
  COHORT_RETURN_IF_ERROR(Optional(map, "decay_steps", [&](auto& n, auto f) {
    COHORT_ASSIGN_OR_RETURN(out.decay_steps, ReadInteger<int64_t>(n, f, lines, "a positive integer"));
    return absl::OkStatus();
  }));
  COHORT_RETURN_IF_ERROR(Optional(map, "decay_rate", [&](auto& n, auto f) {
    COHORT_ASSIGN_OR_RETURN(out.decay_rate, ReadNumber(n, f, lines, kPositiveNumber));
    return absl::OkStatus();
  }));
  COHORT_RETURN_IF_ERROR(Optional(map, "staircase", [&](auto& n, auto f) {
    COHORT_ASSIGN_OR_RETURN(out.staircase, ReadBool(n, f, lines));
    return absl::OkStatus();
  }));
  COHORT_RETURN_IF_ERROR(Optional(map, "alpha", [&](auto& n, auto f) {
    COHORT_ASSIGN_OR_RETURN(out.alpha, ReadNumber(n, f, lines, "in [0, 1]"));
    return absl::OkStatus();
  }));
  return out;
}

absl::Status ParseOptimizer(const YAML::Node& node, FieldLines& lines, OptimizerOverrides& out) {
  const std::string o = "compile.optimizer";
  if (node.IsScalar()) {
    out.kind = keras::OptimizerKindFromName(node.Scalar());
    if (!out.kind.has_value()) {
      return NotSupported(lines, o, node.Scalar(), keras::SupportedOptimizerNames());
    }
    return absl::OkStatus();
  }
  if (!node.IsMap()) {
    return FieldError(lines, o,
                      absl::StrCat("must be an optimizer name or a map, got ", DescribeNode(node)));
  }
  COHORT_ASSIGN_OR_RETURN(
      YamlMap map,
      YamlMap::Read(node, o,
                    {"name", "learning_rate", "schedule", "weight_decay", "momentum", "nesterov",
                     "beta_1", "beta_2", "epsilon", "rho", "initial_accumulator_value"},
                    lines));
  COHORT_RETURN_IF_ERROR(Optional(map, "name", [&](auto& n, auto f) -> absl::Status {
    COHORT_ASSIGN_OR_RETURN(std::string name, ReadString(n, f, lines));
    out.kind = keras::OptimizerKindFromName(name);
    if (out.kind.has_value()) return absl::OkStatus();
    return NotSupported(lines, f, name, keras::SupportedOptimizerNames());
  }));
  if (map.Get("learning_rate").has_value() && map.Get("schedule").has_value()) {
    return FieldError(lines, o + ".schedule",
                      "cannot be combined with compile.optimizer.learning_rate");
  }
  COHORT_RETURN_IF_ERROR(Optional(map, "learning_rate", [&](auto& n, auto f) {
    COHORT_ASSIGN_OR_RETURN(double rate, ReadNumber(n, f, lines, kPositiveNumber));
    out.learning_rate = LearningRate::Constant(rate);
    return absl::OkStatus();
  }));
  COHORT_RETURN_IF_ERROR(Optional(map, "schedule", [&](auto& n, auto) {
    COHORT_ASSIGN_OR_RETURN(out.learning_rate, ParseSchedule(n, lines));
    return absl::OkStatus();
  }));
  const std::pair<absl::string_view, std::optional<double>*> numbers[] = {
      {"weight_decay", &out.weight_decay},
      {"momentum", &out.momentum},
      {"beta_1", &out.beta_1},
      {"beta_2", &out.beta_2},
      {"epsilon", &out.epsilon},
      {"rho", &out.rho},
      {"initial_accumulator_value", &out.initial_accumulator_value},
  };
  for (const auto& [key, field] : numbers) {
    std::optional<double>* value = field;  // clang before 16 cannot capture a binding
    COHORT_RETURN_IF_ERROR(Optional(map, key, [&](auto& n, auto f) {
      COHORT_ASSIGN_OR_RETURN(*value, ReadNumber(n, f, lines, kNumber));
      return absl::OkStatus();
    }));
  }
  return Optional(map, "nesterov", [&](auto& n, auto f) {
    COHORT_ASSIGN_OR_RETURN(out.nesterov, ReadBool(n, f, lines));
    return absl::OkStatus();
  });
}

absl::StatusOr<keras::LossConfig> ParseLoss(const YAML::Node& node, FieldLines& lines) {
  const std::string l = "compile.loss";
  auto from_name = [&](const std::string& name,
                       absl::string_view field) -> absl::StatusOr<keras::LossConfig> {
    std::optional<keras::LossKind> kind = keras::LossKindFromName(name);
    if (!kind.has_value()) return NotSupported(lines, field, name, keras::SupportedLossNames());
    return keras::KerasDefaultLoss(*kind);
  };
  if (node.IsScalar()) return from_name(node.Scalar(), l);
  if (!node.IsMap()) {
    return FieldError(lines, l,
                      absl::StrCat("must be a loss name or a map, got ", DescribeNode(node)));
  }
  COHORT_ASSIGN_OR_RETURN(YamlMap map,
                       YamlMap::Read(node, l, {"name", "from_logits", "delta"}, lines));
  std::optional<YAML::Node> name_node = map.Get("name");
  if (!name_node.has_value()) return map.Missing("name", lines);
  COHORT_ASSIGN_OR_RETURN(std::string name, ReadString(*name_node, l + ".name", lines));
  COHORT_ASSIGN_OR_RETURN(keras::LossConfig out, from_name(name, l + ".name"));
  COHORT_RETURN_IF_ERROR(Optional(map, "from_logits", [&](auto& n, auto f) {
    COHORT_ASSIGN_OR_RETURN(out.from_logits, ReadBool(n, f, lines));
    return absl::OkStatus();
  }));
  COHORT_RETURN_IF_ERROR(Optional(map, "delta", [&](auto& n, auto f) {
    COHORT_ASSIGN_OR_RETURN(out.delta, ReadNumber(n, f, lines, kPositiveNumber));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<keras::MetricConfig>> ParseMetrics(const YAML::Node& node,
                                                              FieldLines& lines) {
  const std::string m = "compile.metrics";
  COHORT_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                       ReadList(node, m, lines, "a list of metric names, e.g. [accuracy]"));
  std::vector<keras::MetricConfig> out;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string field = absl::StrCat(m, "[", i, "]");
    COHORT_ASSIGN_OR_RETURN(std::string name, ReadString(items[i], field, lines));
    std::optional<keras::MetricConfig> metric = keras::MetricFromName(name);
    if (!metric.has_value()) return NotSupported(lines, field, name, keras::SupportedMetricNames());
    out.push_back(*std::move(metric));
  }
  return out;
}

std::string LowerName(keras::OptimizerKind kind) {
  return absl::AsciiStrToLower(keras::OptimizerKindName(kind));
}

void EmitNumber(YAML::Emitter& out, absl::string_view key, double value) {
  out << YAML::Key << std::string(key) << YAML::Value << FormatNumber(value);
}

void EmitOptimizer(const OptimizerOverrides& o, YAML::Emitter& out) {
  out << YAML::BeginMap;
  if (o.kind.has_value()) out << YAML::Key << "name" << YAML::Value << LowerName(*o.kind);
  if (o.learning_rate.has_value()) {
    const LearningRate& rate = *o.learning_rate;
    if (rate.kind == LearningRate::Kind::kConstant) {
      EmitNumber(out, "learning_rate", rate.initial);
    } else {
      const bool exponential = rate.kind == LearningRate::Kind::kExponentialDecay;
      out << YAML::Key << "schedule" << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "name" << YAML::Value
          << (exponential ? "exponential_decay" : "cosine_decay");
      EmitNumber(out, "initial_learning_rate", rate.initial);
      out << YAML::Key << "decay_steps" << YAML::Value << rate.decay_steps;
      if (exponential) {
        EmitNumber(out, "decay_rate", rate.decay_rate);
        out << YAML::Key << "staircase" << YAML::Value << rate.staircase;
      } else {
        EmitNumber(out, "alpha", rate.alpha);
      }
      out << YAML::EndMap;
    }
  }
  const std::pair<absl::string_view, const std::optional<double>*> numbers[] = {
      {"weight_decay", &o.weight_decay},
      {"momentum", &o.momentum},
      {"beta_1", &o.beta_1},
      {"beta_2", &o.beta_2},
      {"epsilon", &o.epsilon},
      {"rho", &o.rho},
      {"initial_accumulator_value", &o.initial_accumulator_value},
  };
  for (const auto& [key, value] : numbers) {
    if (value->has_value()) EmitNumber(out, key, **value);
  }
  if (o.nesterov.has_value()) out << YAML::Key << "nesterov" << YAML::Value << *o.nesterov;
  out << YAML::EndMap;
}

bool IsEmpty(const OptimizerOverrides& o) {
  return !o.kind && !o.learning_rate && !o.weight_decay && !o.momentum && !o.nesterov &&
         !o.beta_1 && !o.beta_2 && !o.epsilon && !o.rho && !o.initial_accumulator_value;
}

}  // namespace

absl::Status ParseCompileSection(const YAML::Node& node, FieldLines& lines, CompileOverrides& out) {
  COHORT_ASSIGN_OR_RETURN(
      YamlMap map,
      YamlMap::Read(node, "compile", {"optimizer", "learning_rate", "loss", "metrics"}, lines));
  COHORT_RETURN_IF_ERROR(Optional(
      map, "optimizer", [&](auto& n, auto) { return ParseOptimizer(n, lines, out.optimizer); }));
  COHORT_RETURN_IF_ERROR(Optional(map, "learning_rate", [&](auto& n, auto f) -> absl::Status {
    if (out.optimizer.learning_rate.has_value()) {
      const bool constant = out.optimizer.learning_rate->kind == LearningRate::Kind::kConstant;
      return FieldError(lines, f,
                        absl::StrCat("cannot be combined with compile.optimizer.",
                                     constant ? "learning_rate" : "schedule"));
    }
    COHORT_ASSIGN_OR_RETURN(double rate, ReadNumber(n, f, lines, kPositiveNumber));
    out.optimizer.learning_rate = LearningRate::Constant(rate);
    lines.emplace("compile.optimizer.learning_rate", lines.at(f));
    return absl::OkStatus();
  }));
  COHORT_RETURN_IF_ERROR(Optional(map, "loss", [&](auto& n, auto) {
    COHORT_ASSIGN_OR_RETURN(out.loss, ParseLoss(n, lines));
    return absl::OkStatus();
  }));
  return Optional(map, "metrics", [&](auto& n, auto) {
    COHORT_ASSIGN_OR_RETURN(out.metrics, ParseMetrics(n, lines));
    return absl::OkStatus();
  });
}

bool IsEmpty(const CompileOverrides& overrides) {
  return IsEmpty(overrides.optimizer) && !overrides.loss.has_value() && overrides.metrics.empty();
}

void EmitCompileSection(const CompileOverrides& overrides, YAML::Emitter& out) {
  out << YAML::BeginMap;
  if (!IsEmpty(overrides.optimizer)) {
    out << YAML::Key << "optimizer" << YAML::Value;
    EmitOptimizer(overrides.optimizer, out);
  }
  if (overrides.loss.has_value()) {
    const keras::LossConfig& loss = *overrides.loss;
    out << YAML::Key << "loss" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << std::string(keras::LossKindName(loss.kind));
    if (loss.from_logits) out << YAML::Key << "from_logits" << YAML::Value << true;
    if (loss.kind == keras::LossKind::kHuber) EmitNumber(out, "delta", loss.delta);
    out << YAML::EndMap;
  }
  if (!overrides.metrics.empty()) {
    out << YAML::Key << "metrics" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const keras::MetricConfig& metric : overrides.metrics) out << metric.name;
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
}

}  // namespace cohort::job
