#include "common/keras/layer_parser.h"

#include <array>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/keras/keras_objects.h"

namespace cohort::keras::internal {
namespace {

absl::StatusOr<int64_t> PositiveInt(const FieldReader& config, absl::string_view key) {
  COHORT_ASSIGN_OR_RETURN(int64_t v, config.Int(key));
  if (v < 1) return config.Error(absl::StrCat(key, " must be at least 1, got ", v));
  return v;
}

// A tuple of N positive ints (or one int for all N); `fallback` when absent.
template <int N>
absl::StatusOr<std::array<int64_t, N>> PositiveTuple(const FieldReader& config,
                                                     absl::string_view key,
                                                     std::optional<int64_t> fallback) {
  COHORT_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> v, config.IntList(key, N));
  if (!v) {
    if (!fallback) return config.Error(absl::StrCat("field '", key, "' is missing"));
    v = std::vector<int64_t>(N, *fallback);
  }
  if (v->size() != N) {
    return config.Error(absl::StrCat(key, " must have ", N, " entries, got ", v->size()));
  }
  std::array<int64_t, N> out;
  for (int i = 0; i < N; ++i) {
    if ((*v)[i] < 1) return config.Error(absl::StrCat(key, " entries must be at least 1"));
    out[i] = (*v)[i];
  }
  return out;
}

absl::Status CheckChannelsLast(const FieldReader& config) {
  COHORT_ASSIGN_OR_RETURN(std::string format, config.String("data_format", "channels_last"));
  if (format == "channels_last") return absl::OkStatus();
  if (format == "channels_first") {
    return config.Error(
        "data_format channels_first is not supported (Cohort supports "
        "channels_last only)");
  }
  return config.Error(absl::StrCat("data_format '", format, "' is not channels_last"));
}

absl::StatusOr<Padding> ReadPadding(const FieldReader& config, bool allow_causal) {
  COHORT_ASSIGN_OR_RETURN(std::string padding, config.String("padding", "valid"));
  padding = absl::AsciiStrToLower(padding);
  if (padding == "valid") return Padding::kValid;
  if (padding == "same") return Padding::kSame;
  if (padding == "causal" && allow_causal) return Padding::kCausal;
  return config.Error(absl::StrCat("padding '", padding,
                                   "' is not supported; supported: valid, same",
                                   allow_causal ? ", causal" : ""));
}

// Regularizers, constraints, LoRA and quantization change what training computes.
absl::Status RequireNoExtras(const FieldReader& config,
                             std::initializer_list<absl::string_view> vars) {
  for (absl::string_view var : vars) {
    COHORT_RETURN_IF_ERROR(config.RequireNull(absl::StrCat(var, "_regularizer"), "regularizers"));
    COHORT_RETURN_IF_ERROR(config.RequireNull(absl::StrCat(var, "_constraint"), "constraints"));
  }
  COHORT_RETURN_IF_ERROR(config.RequireNull("lora_rank", "LoRA"));
  return config.RequireNull("quantization_config", "quantized layers");
}

absl::StatusOr<int> ReadAxis(const FieldReader& config, int64_t fallback) {
  const Json* v = config.Find("axis");
  if (v != nullptr && v->is_array()) return config.Error("axis must be a single integer");
  COHORT_ASSIGN_OR_RETURN(int64_t axis, config.Int("axis", fallback));
  if (axis < -64 || axis > 64) return config.Error(absl::StrCat("axis ", axis, " is out of range"));
  return static_cast<int>(axis);
}

absl::StatusOr<InputLayerConfig> ParseInputLayer(const FieldReader& config) {
  if (config.Find("batch_input_shape") != nullptr) {
    return config.Error(
        "has batch_input_shape: this is a Keras 2 (tf.keras) model config; "
        "Cohort reads Keras 3 configs (save the model with Keras 3)");
  }
  InputLayerConfig out;
  for (absl::string_view flag : {"sparse", "ragged", "optional"}) {
    COHORT_ASSIGN_OR_RETURN(bool set, config.Bool(flag, false));
    if (set) return config.Error(absl::StrCat(flag, " inputs are not supported"));
  }
  const Json* batch_shape = config.Find("batch_shape");
  bool has_batch = batch_shape != nullptr;
  const Json* shape = has_batch ? batch_shape : config.Find("shape");
  absl::string_view key = has_batch ? "batch_shape" : "shape";
  if (shape == nullptr) return config.Error("has no batch_shape");
  if (!shape->is_array()) {
    return config.Error(absl::StrCat("field '", key, "' must be a list, got ", Describe(*shape)));
  }
  if (has_batch && shape->empty()) return config.Error("batch_shape has no batch dimension");
  for (size_t i = has_batch ? 1 : 0; i < shape->size(); ++i) {
    const Json& d = (*shape)[i];
    if (d.is_null()) {
      out.shape.push_back(kUnknownDim);
      continue;
    }
    std::optional<int64_t> dim = AsInt64(d);
    if (!dim || *dim < 1) {
      return config.Error(
          absl::StrCat(key, " entries must be positive integers or null, got ", Describe(d)));
    }
    out.shape.push_back(*dim);
  }
  COHORT_ASSIGN_OR_RETURN(out.dtype, ReadDType(config, "dtype"));
  return out;
}

absl::StatusOr<DenseConfig> ParseDense(const FieldReader& config) {
  DenseConfig out;
  COHORT_ASSIGN_OR_RETURN(out.units, PositiveInt(config, "units"));
  COHORT_ASSIGN_OR_RETURN(out.activation, ReadActivation(config, "activation"));
  COHORT_ASSIGN_OR_RETURN(out.use_bias, config.Bool("use_bias", true));
  COHORT_ASSIGN_OR_RETURN(out.kernel_initializer,
                         ReadInitializer(config, "kernel_initializer", out.kernel_initializer));
  COHORT_ASSIGN_OR_RETURN(out.bias_initializer,
                         ReadInitializer(config, "bias_initializer", out.bias_initializer));
  COHORT_RETURN_IF_ERROR(RequireNoExtras(config, {"kernel", "bias"}));
  return out;
}

template <int N>
absl::StatusOr<ConvConfig<N>> ParseConv(const FieldReader& config) {
  ConvConfig<N> out;
  COHORT_RETURN_IF_ERROR(CheckChannelsLast(config));
  COHORT_ASSIGN_OR_RETURN(out.filters, PositiveInt(config, "filters"));
  COHORT_ASSIGN_OR_RETURN(out.kernel_size, PositiveTuple<N>(config, "kernel_size", std::nullopt));
  COHORT_ASSIGN_OR_RETURN(out.strides, PositiveTuple<N>(config, "strides", 1));
  COHORT_ASSIGN_OR_RETURN(out.dilation_rate, PositiveTuple<N>(config, "dilation_rate", 1));
  COHORT_ASSIGN_OR_RETURN(out.padding, ReadPadding(config, /*allow_causal=*/N == 1));
  COHORT_ASSIGN_OR_RETURN(out.groups, config.Int("groups", 1));
  if (out.groups < 1) return config.Error("groups must be at least 1");
  if (out.filters % out.groups != 0) {
    return config.Error(absl::StrCat("filters (", out.filters, ") must be a multiple of groups (",
                                     out.groups, ")"));
  }
  bool strided = false, dilated = false;
  for (int i = 0; i < N; ++i) {
    strided |= out.strides[i] > 1;
    dilated |= out.dilation_rate[i] > 1;
  }
  if (strided && dilated) return config.Error("strides > 1 together with dilation_rate > 1");
  COHORT_ASSIGN_OR_RETURN(out.activation, ReadActivation(config, "activation"));
  COHORT_ASSIGN_OR_RETURN(out.use_bias, config.Bool("use_bias", true));
  COHORT_ASSIGN_OR_RETURN(out.kernel_initializer,
                         ReadInitializer(config, "kernel_initializer", out.kernel_initializer));
  COHORT_ASSIGN_OR_RETURN(out.bias_initializer,
                         ReadInitializer(config, "bias_initializer", out.bias_initializer));
  COHORT_RETURN_IF_ERROR(RequireNoExtras(config, {"kernel", "bias"}));
  return out;
}

template <typename Config>
absl::StatusOr<Config> ParsePooling(const FieldReader& config) {
  constexpr int kN = std::tuple_size_v<decltype(Config::pool_size)>;
  Config out;
  COHORT_RETURN_IF_ERROR(CheckChannelsLast(config));
  COHORT_ASSIGN_OR_RETURN(out.pool_size, PositiveTuple<kN>(config, "pool_size", 2));
  if (config.Find("strides") == nullptr) {
    out.strides = out.pool_size;
  } else {
    COHORT_ASSIGN_OR_RETURN(out.strides, PositiveTuple<kN>(config, "strides", std::nullopt));
  }
  COHORT_ASSIGN_OR_RETURN(out.padding, ReadPadding(config, /*allow_causal=*/false));
  return out;
}

template <typename Config>
absl::StatusOr<Config> ParseGlobalPooling(const FieldReader& config) {
  Config out;
  COHORT_RETURN_IF_ERROR(CheckChannelsLast(config));
  COHORT_ASSIGN_OR_RETURN(out.keepdims, config.Bool("keepdims", false));
  return out;
}

absl::StatusOr<ReshapeConfig> ParseReshape(const FieldReader& config) {
  ReshapeConfig out;
  COHORT_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> target,
                         config.IntList("target_shape"));
  if (!target) return config.Error("field 'target_shape' is missing");
  int wildcards = 0;
  for (int64_t d : *target) {
    if (d == -1) {
      ++wildcards;
    } else if (d < 1) {
      return config.Error(absl::StrCat("target_shape entries must be positive or -1, got ", d));
    }
  }
  if (wildcards > 1) return config.Error("target_shape has more than one -1");
  out.target_shape = std::move(*target);
  return out;
}

absl::StatusOr<DropoutConfig> ParseDropout(const FieldReader& config) {
  DropoutConfig out;
  COHORT_ASSIGN_OR_RETURN(out.rate, config.Double("rate"));
  if (!(out.rate >= 0 && out.rate < 1)) {
    return config.Error(absl::StrCat("rate must be in [0, 1), got ", out.rate));
  }
  COHORT_ASSIGN_OR_RETURN(out.seed, config.OptionalInt("seed"));
  if (const Json* noise = config.Find("noise_shape")) {
    if (!noise->is_array()) {
      return config.Error(
          absl::StrCat("field 'noise_shape' must be a list, got ", Describe(*noise)));
    }
    std::vector<int64_t> dims;
    for (const Json& d : *noise) {
      std::optional<int64_t> dim = d.is_null() ? std::optional<int64_t>(kUnknownDim) : AsInt64(d);
      if (!dim || (*dim < 1 && *dim != kUnknownDim)) {
        return config.Error(absl::StrCat(
            "noise_shape entries must be positive integers or null, got ", Describe(d)));
      }
      dims.push_back(*dim);
    }
    out.noise_shape = std::move(dims);
  }
  return out;
}

absl::StatusOr<BatchNormalizationConfig> ParseBatchNormalization(const FieldReader& config) {
  BatchNormalizationConfig out;
  COHORT_ASSIGN_OR_RETURN(out.axis, ReadAxis(config, -1));
  COHORT_ASSIGN_OR_RETURN(out.momentum, config.Double("momentum", out.momentum));
  COHORT_ASSIGN_OR_RETURN(out.epsilon, config.Double("epsilon", out.epsilon));
  if (!(out.epsilon > 0)) return config.Error("epsilon must be positive");
  COHORT_ASSIGN_OR_RETURN(out.center, config.Bool("center", true));
  COHORT_ASSIGN_OR_RETURN(out.scale, config.Bool("scale", true));
  for (absl::string_view flag : {"synchronized", "renorm"}) {
    COHORT_ASSIGN_OR_RETURN(bool set, config.Bool(flag, false));
    if (set) return config.Error(absl::StrCat(flag, "=True is not supported"));
  }
  COHORT_ASSIGN_OR_RETURN(out.beta_initializer,
                         ReadInitializer(config, "beta_initializer", out.beta_initializer));
  COHORT_ASSIGN_OR_RETURN(out.gamma_initializer,
                         ReadInitializer(config, "gamma_initializer", out.gamma_initializer));
  COHORT_ASSIGN_OR_RETURN(
      out.moving_mean_initializer,
      ReadInitializer(config, "moving_mean_initializer", out.moving_mean_initializer));
  COHORT_ASSIGN_OR_RETURN(
      out.moving_variance_initializer,
      ReadInitializer(config, "moving_variance_initializer", out.moving_variance_initializer));
  COHORT_RETURN_IF_ERROR(RequireNoExtras(config, {"beta", "gamma"}));
  return out;
}

absl::StatusOr<LayerNormalizationConfig> ParseLayerNormalization(const FieldReader& config) {
  LayerNormalizationConfig out;
  COHORT_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, config.IntList("axis"));
  if (axes) {
    if (axes->empty()) return config.Error("axis is an empty list");
    out.axes.clear();
    for (int64_t a : *axes) {
      if (a < -64 || a > 64) return config.Error(absl::StrCat("axis ", a, " is out of range"));
      out.axes.push_back(static_cast<int>(a));
    }
  }
  COHORT_ASSIGN_OR_RETURN(out.epsilon, config.Double("epsilon", out.epsilon));
  if (!(out.epsilon > 0)) return config.Error("epsilon must be positive");
  COHORT_ASSIGN_OR_RETURN(out.center, config.Bool("center", true));
  COHORT_ASSIGN_OR_RETURN(out.scale, config.Bool("scale", true));
  COHORT_ASSIGN_OR_RETURN(bool rms_scaling, config.Bool("rms_scaling", false));
  if (rms_scaling) return config.Error("rms_scaling=True is not supported");
  COHORT_ASSIGN_OR_RETURN(out.beta_initializer,
                         ReadInitializer(config, "beta_initializer", out.beta_initializer));
  COHORT_ASSIGN_OR_RETURN(out.gamma_initializer,
                         ReadInitializer(config, "gamma_initializer", out.gamma_initializer));
  COHORT_RETURN_IF_ERROR(RequireNoExtras(config, {"beta", "gamma"}));
  return out;
}

absl::StatusOr<ReLUConfig> ParseReLU(const FieldReader& config) {
  ReLUConfig out;
  COHORT_ASSIGN_OR_RETURN(out.max_value, config.OptionalDouble("max_value"));
  if (out.max_value && *out.max_value < 0) return config.Error("max_value must not be negative");
  COHORT_ASSIGN_OR_RETURN(out.negative_slope, config.Double("negative_slope", 0.0));
  if (out.negative_slope < 0) return config.Error("negative_slope must not be negative");
  COHORT_ASSIGN_OR_RETURN(out.threshold, config.Double("threshold", 0.0));
  return out;
}

absl::StatusOr<EmbeddingConfig> ParseEmbedding(const FieldReader& config) {
  EmbeddingConfig out;
  COHORT_ASSIGN_OR_RETURN(out.input_dim, PositiveInt(config, "input_dim"));
  COHORT_ASSIGN_OR_RETURN(out.output_dim, PositiveInt(config, "output_dim"));
  COHORT_ASSIGN_OR_RETURN(bool mask_zero, config.Bool("mask_zero", false));
  if (mask_zero) {
    return config.Error("mask_zero=True is not supported (Cohort does not propagate masks)");
  }
  COHORT_ASSIGN_OR_RETURN(
      out.embeddings_initializer,
      ReadInitializer(config, "embeddings_initializer", out.embeddings_initializer));
  COHORT_RETURN_IF_ERROR(RequireNoExtras(config, {"embeddings"}));
  return out;
}

}  // namespace

absl::StatusOr<LayerConfig> ParseLayerConfig(LayerClass layer_class, const FieldReader& config) {
  if (layer_class == LayerClass::kInputLayer) return ParseInputLayer(config);
  COHORT_RETURN_IF_ERROR(CheckFloat32Policy(config));
  COHORT_RETURN_IF_ERROR(config.RequireNull("activity_regularizer", "regularizers"));
  switch (layer_class) {
    case LayerClass::kInputLayer:
      break;  // handled above
    case LayerClass::kDense:
      return ParseDense(config);
    case LayerClass::kConv1D:
      return ParseConv<1>(config);
    case LayerClass::kConv2D:
      return ParseConv<2>(config);
    case LayerClass::kMaxPooling1D:
      return ParsePooling<MaxPooling1DConfig>(config);
    case LayerClass::kMaxPooling2D:
      return ParsePooling<MaxPooling2DConfig>(config);
    case LayerClass::kAveragePooling2D:
      return ParsePooling<AveragePooling2DConfig>(config);
    case LayerClass::kGlobalAveragePooling1D:
      return ParseGlobalPooling<GlobalAveragePooling1DConfig>(config);
    case LayerClass::kGlobalAveragePooling2D:
      return ParseGlobalPooling<GlobalAveragePooling2DConfig>(config);
    case LayerClass::kGlobalMaxPooling2D:
      return ParseGlobalPooling<GlobalMaxPooling2DConfig>(config);
    case LayerClass::kFlatten:
      COHORT_RETURN_IF_ERROR(CheckChannelsLast(config));
      return FlattenConfig{};
    case LayerClass::kReshape:
      return ParseReshape(config);
    case LayerClass::kDropout:
      return ParseDropout(config);
    case LayerClass::kBatchNormalization:
      return ParseBatchNormalization(config);
    case LayerClass::kLayerNormalization:
      return ParseLayerNormalization(config);
    case LayerClass::kActivation: {
      COHORT_ASSIGN_OR_RETURN(Activation activation, ReadActivation(config, "activation"));
      return ActivationConfig{activation};
    }
    case LayerClass::kReLU:
      return ParseReLU(config);
    case LayerClass::kSoftmax: {
      COHORT_ASSIGN_OR_RETURN(int axis, ReadAxis(config, -1));
      return SoftmaxConfig{axis};
    }
    case LayerClass::kEmbedding:
      return ParseEmbedding(config);
    case LayerClass::kAdd:
      return AddConfig{};
    case LayerClass::kConcatenate: {
      COHORT_ASSIGN_OR_RETURN(int axis, ReadAxis(config, -1));
      return ConcatenateConfig{axis};
    }
  }
  return config.Error("unknown layer class");
}

}  // namespace cohort::keras::internal
