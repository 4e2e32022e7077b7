#include "common/keras/model_ir.h"

#include <utility>

#include "absl/strings/str_join.h"

namespace cohort::keras {
namespace {

constexpr std::pair<DType, absl::string_view> kDTypeNames[] = {
    {DType::kBool, "bool"},       {DType::kInt8, "int8"},         {DType::kInt16, "int16"},
    {DType::kInt32, "int32"},     {DType::kInt64, "int64"},       {DType::kUint8, "uint8"},
    {DType::kUint16, "uint16"},   {DType::kUint32, "uint32"},     {DType::kUint64, "uint64"},
    {DType::kFloat16, "float16"}, {DType::kBfloat16, "bfloat16"}, {DType::kFloat32, "float32"},
    {DType::kFloat64, "float64"},
};

constexpr absl::string_view kActivationNames[] = {
    "linear", "relu", "sigmoid", "tanh",     "softmax",    "gelu",
    "silu",   "elu",  "selu",    "softplus", "leaky_relu",
};

constexpr absl::string_view kLayerClassNames[kLayerClassCount] = {
    "InputLayer",
    "Dense",
    "Conv1D",
    "Conv2D",
    "MaxPooling1D",
    "MaxPooling2D",
    "AveragePooling2D",
    "GlobalAveragePooling1D",
    "GlobalAveragePooling2D",
    "GlobalMaxPooling2D",
    "Flatten",
    "Reshape",
    "Dropout",
    "BatchNormalization",
    "LayerNormalization",
    "Activation",
    "ReLU",
    "Softmax",
    "Embedding",
    "Add",
    "Concatenate",
};

}  // namespace

absl::string_view DTypeName(DType dtype) {
  for (const auto& [d, name] : kDTypeNames) {
    if (d == dtype) return name;
  }
  return "unknown";
}

std::optional<DType> DTypeFromName(absl::string_view name) {
  for (const auto& [d, n] : kDTypeNames) {
    if (n == name) return d;
  }
  return std::nullopt;
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBfloat16 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat64;
}

absl::string_view ActivationName(Activation activation) {
  return kActivationNames[static_cast<int>(activation)];
}

absl::string_view LayerClassName(LayerClass layer_class) {
  return kLayerClassNames[static_cast<int>(layer_class)];
}

std::optional<LayerClass> LayerClassFromName(absl::string_view class_name) {
  for (int i = 0; i < kLayerClassCount; ++i) {
    if (kLayerClassNames[i] == class_name) return static_cast<LayerClass>(i);
  }
  return std::nullopt;
}

std::string SupportedLayerClassNames() { return absl::StrJoin(kLayerClassNames, ", "); }

}  // namespace cohort::keras
