#include "common/keras/keras_objects.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cohort::keras::internal {
namespace {

constexpr std::pair<absl::string_view, Activation> kActivations[] = {
    {"linear", Activation::kLinear},     {"relu", Activation::kRelu},
    {"sigmoid", Activation::kSigmoid},   {"tanh", Activation::kTanh},
    {"softmax", Activation::kSoftmax},   {"gelu", Activation::kGelu},
    {"silu", Activation::kSilu},         {"swish", Activation::kSilu},
    {"elu", Activation::kElu},           {"selu", Activation::kSelu},
    {"softplus", Activation::kSoftplus}, {"leaky_relu", Activation::kLeakyRelu},
};

std::string SupportedActivations() {
  std::string out;
  for (const auto& [name, a] : kActivations) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", name);
  }
  return out;
}

// Initializer families, keyed by Keras' class name; Keras also accepts the snake_case
// of each ("glorot_uniform") and a few aliases.
enum class InitFamily {
  kZeros,
  kOnes,
  kConstant,
  kRandomNormal,
  kRandomUniform,
  kTruncatedNormal,
  kVarianceScaling,
  kGlorotUniform,
  kGlorotNormal,
  kHeUniform,
  kHeNormal,
  kLecunUniform,
  kLecunNormal,
};

struct InitName {
  absl::string_view class_name;
  absl::string_view snake_name;
  InitFamily family;
};

constexpr InitName kInitializers[] = {
    {"Zeros", "zeros", InitFamily::kZeros},
    {"Ones", "ones", InitFamily::kOnes},
    {"Constant", "constant", InitFamily::kConstant},
    {"RandomNormal", "random_normal", InitFamily::kRandomNormal},
    {"RandomUniform", "random_uniform", InitFamily::kRandomUniform},
    {"TruncatedNormal", "truncated_normal", InitFamily::kTruncatedNormal},
    {"VarianceScaling", "variance_scaling", InitFamily::kVarianceScaling},
    {"GlorotUniform", "glorot_uniform", InitFamily::kGlorotUniform},
    {"GlorotNormal", "glorot_normal", InitFamily::kGlorotNormal},
    {"HeUniform", "he_uniform", InitFamily::kHeUniform},
    {"HeNormal", "he_normal", InitFamily::kHeNormal},
    {"LecunUniform", "lecun_uniform", InitFamily::kLecunUniform},
    {"LecunNormal", "lecun_normal", InitFamily::kLecunNormal},
};

constexpr std::pair<absl::string_view, InitFamily> kInitializerAliases[] = {
    {"zero", InitFamily::kZeros},
    {"one", InitFamily::kOnes},
    {"normal", InitFamily::kRandomNormal},
    {"uniform", InitFamily::kRandomUniform},
};

std::optional<InitFamily> InitFamilyFromName(absl::string_view name) {
  for (const InitName& n : kInitializers) {
    if (n.class_name == name || n.snake_name == name) return n.family;
  }
  for (const auto& [alias, family] : kInitializerAliases) {
    if (alias == name) return family;
  }
  return std::nullopt;
}

std::string SupportedInitializers() {
  std::string out;
  for (const InitName& n : kInitializers) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", n.class_name);
  }
  return out;
}

Initializer VarianceScaling(double scale, Initializer::FanMode mode,
                            Initializer::Distribution distribution) {
  Initializer out = Initializer::OfKind(Initializer::Kind::kVarianceScaling);
  out.scale = scale;
  out.mode = mode;
  out.distribution = distribution;
  return out;
}

absl::Status ReadFanMode(const FieldReader& config, Initializer& out) {
  COHORT_ASSIGN_OR_RETURN(std::string mode, config.String("mode", "fan_in"));
  if (mode == "fan_in") {
    out.mode = Initializer::FanMode::kFanIn;
  } else if (mode == "fan_out") {
    out.mode = Initializer::FanMode::kFanOut;
  } else if (mode == "fan_avg") {
    out.mode = Initializer::FanMode::kFanAvg;
  } else {
    return config.Error(absl::StrCat("mode '", mode, "' is not one of fan_in, fan_out, fan_avg"));
  }
  return absl::OkStatus();
}

absl::Status ReadDistribution(const FieldReader& config, Initializer& out) {
  COHORT_ASSIGN_OR_RETURN(std::string d, config.String("distribution", "truncated_normal"));
  if (d == "uniform") {
    out.distribution = Initializer::Distribution::kUniform;
  } else if (d == "truncated_normal" || d == "normal") {
    out.distribution = Initializer::Distribution::kTruncatedNormal;
  } else if (d == "untruncated_normal") {
    out.distribution = Initializer::Distribution::kUntruncatedNormal;
  } else {
    return config.Error(absl::StrCat("distribution '", d,
                                     "' is not one of uniform, truncated_normal, "
                                     "untruncated_normal"));
  }
  return absl::OkStatus();
}

// The initializer of `family` with the fields of `config` (an object, possibly empty).
absl::StatusOr<Initializer> MakeInitializer(InitFamily family, const FieldReader& config) {
  using Kind = Initializer::Kind;
  using Fan = Initializer::FanMode;
  using Dist = Initializer::Distribution;
  Initializer out;
  switch (family) {
    case InitFamily::kZeros:
      return Initializer::Zeros();
    case InitFamily::kOnes:
      return Initializer::Ones();
    case InitFamily::kConstant: {
      out.kind = Kind::kConstant;
      COHORT_ASSIGN_OR_RETURN(out.value, config.Double("value", 0.0));
      return out;
    }
    case InitFamily::kRandomNormal:
    case InitFamily::kTruncatedNormal: {
      out.kind = family == InitFamily::kRandomNormal ? Kind::kRandomNormal : Kind::kTruncatedNormal;
      COHORT_ASSIGN_OR_RETURN(out.mean, config.Double("mean", 0.0));
      COHORT_ASSIGN_OR_RETURN(out.stddev, config.Double("stddev", 0.05));
      if (out.stddev < 0) return config.Error("stddev must not be negative");
      break;
    }
    case InitFamily::kRandomUniform: {
      out.kind = Kind::kRandomUniform;
      COHORT_ASSIGN_OR_RETURN(out.minval, config.Double("minval", -0.05));
      COHORT_ASSIGN_OR_RETURN(out.maxval, config.Double("maxval", 0.05));
      if (out.minval > out.maxval) return config.Error("minval is larger than maxval");
      break;
    }
    case InitFamily::kVarianceScaling: {
      COHORT_ASSIGN_OR_RETURN(double scale, config.Double("scale", 1.0));
      if (!(scale > 0)) return config.Error("scale must be positive");
      out = VarianceScaling(scale, Fan::kFanIn, Dist::kTruncatedNormal);
      COHORT_RETURN_IF_ERROR(ReadFanMode(config, out));
      COHORT_RETURN_IF_ERROR(ReadDistribution(config, out));
      break;
    }
    case InitFamily::kGlorotUniform:
      out = VarianceScaling(1.0, Fan::kFanAvg, Dist::kUniform);
      break;
    case InitFamily::kGlorotNormal:
      out = VarianceScaling(1.0, Fan::kFanAvg, Dist::kTruncatedNormal);
      break;
    case InitFamily::kHeUniform:
      out = VarianceScaling(2.0, Fan::kFanIn, Dist::kUniform);
      break;
    case InitFamily::kHeNormal:
      out = VarianceScaling(2.0, Fan::kFanIn, Dist::kTruncatedNormal);
      break;
    case InitFamily::kLecunUniform:
      out = VarianceScaling(1.0, Fan::kFanIn, Dist::kUniform);
      break;
    case InitFamily::kLecunNormal:
      out = VarianceScaling(1.0, Fan::kFanIn, Dist::kTruncatedNormal);
      break;
  }
  if (out.kind == Kind::kVarianceScaling) {
    COHORT_RETURN_IF_ERROR(config.RequireNull("input_axes", "custom fan axes"));
    COHORT_RETURN_IF_ERROR(config.RequireNull("output_axes", "custom fan axes"));
  }
  COHORT_ASSIGN_OR_RETURN(out.seed, config.OptionalInt("seed"));
  return out;
}

// The class name of a serialized object, or an error naming the field.
absl::StatusOr<std::string> ObjectClassName(const FieldReader& fields, absl::string_view key,
                                            const Json& object) {
  FieldReader obj(object, fields.context());
  auto class_name = obj.String("class_name");
  if (!class_name.ok()) {
    return fields.Error(absl::StrCat("field '", key,
                                     "' must be a name or a serialized object "
                                     "with a class_name"));
  }
  return class_name;
}

}  // namespace

absl::StatusOr<Activation> ReadActivation(const FieldReader& fields, absl::string_view key) {
  const Json* value = fields.Find(key);
  if (value == nullptr) return Activation::kLinear;
  std::string name;
  if (value->is_string()) {
    name = value->get<std::string>();
  } else if (value->is_object()) {
    COHORT_ASSIGN_OR_RETURN(std::string class_name, ObjectClassName(fields, key, *value));
    auto config = value->find("config");
    if (class_name != "function" || config == value->end() || !config->is_string()) {
      return fields.Error(absl::StrCat(
          key, " is a ", class_name,
          " object, which Cohort does not support; use one of: ", SupportedActivations()));
    }
    name = config->get<std::string>();
  } else {
    return fields.Error(
        absl::StrCat("field '", key, "' must be an activation name, got ", Describe(*value)));
  }
  for (const auto& [n, activation] : kActivations) {
    if (n == name) return activation;
  }
  return fields.Error(
      absl::StrCat(key, " '", name, "' is not supported; supported: ", SupportedActivations()));
}

absl::StatusOr<Initializer> ReadInitializer(const FieldReader& fields, absl::string_view key,
                                            const Initializer& fallback) {
  const Json* value = fields.Find(key);
  if (value == nullptr) return fallback;
  std::string name;
  const Json* config = nullptr;
  if (value->is_string()) {
    name = value->get<std::string>();
  } else if (value->is_object()) {
    COHORT_ASSIGN_OR_RETURN(name, ObjectClassName(fields, key, *value));
    auto it = value->find("config");
    if (it != value->end() && !it->is_null()) {
      if (!it->is_object()) {
        return fields.Error(absl::StrCat("field '", key, "' has a config that is ", Describe(*it),
                                         ", not an object"));
      }
      config = &*it;
    }
  } else {
    return fields.Error(
        absl::StrCat("field '", key, "' must be an initializer, got ", Describe(*value)));
  }
  std::optional<InitFamily> family = InitFamilyFromName(name);
  if (!family) {
    return fields.Error(
        absl::StrCat(key, " ", name, " is not supported; supported: ", SupportedInitializers()));
  }
  static const Json kEmpty = Json::object();
  return MakeInitializer(*family, FieldReader(config != nullptr ? *config : kEmpty,
                                              absl::StrCat(fields.context(), ": ", key)));
}

absl::Status CheckFloat32Policy(const FieldReader& fields) {
  const Json* value = fields.Find("dtype");
  if (value == nullptr) return absl::OkStatus();
  std::string name;
  if (value->is_string()) {
    name = value->get<std::string>();
  } else if (value->is_object()) {
    FieldReader policy(*value, fields.context());
    COHORT_ASSIGN_OR_RETURN(std::string class_name, policy.String("class_name", "DTypePolicy"));
    if (class_name != "DTypePolicy" && class_name != "FloatDTypePolicy") {
      return fields.Error(absl::StrCat("dtype policy ", class_name,
                                       " is not supported (Cohort computes in float32)"));
    }
    const Json* config = policy.Find("config");
    if (config == nullptr) return fields.Error("dtype policy has no config");
    COHORT_ASSIGN_OR_RETURN(name, FieldReader(*config, fields.context()).String("name"));
  } else {
    return fields.Error(
        absl::StrCat("field 'dtype' must be a dtype policy, got ", Describe(*value)));
  }
  if (name != "float32") {
    return fields.Error(
        absl::StrCat("dtype policy '", name, "' is not supported (Cohort computes in float32)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DType> ReadDType(const FieldReader& fields, absl::string_view key) {
  COHORT_ASSIGN_OR_RETURN(std::string name, fields.String(key, "float32"));
  std::optional<DType> dtype = DTypeFromName(name);
  if (!dtype) return fields.Error(absl::StrCat("dtype '", name, "' is not a known dtype"));
  return *dtype;
}

}  // namespace cohort::keras::internal
