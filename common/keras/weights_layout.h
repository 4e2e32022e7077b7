#pragma once

// Internal to common/keras: the variables Keras creates for a layer and the name of its
// group in model.weights.h5 (the layout is described in model_ir.h).

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/keras/model_ir.h"

namespace cohort::keras::internal {

// The variables of `node` in Keras' creation order, for a node whose (first) input has
// per-sample shape `input_shape` and whose axes are resolved; h5_path is left empty.
std::vector<WeightSpec> MakeWeights(const Node& node, const Shape& input_shape);

// Keras' naming.to_snake_case: "Conv2D" -> "conv2d", "ReLU" -> "re_lu",
// "BatchNormalization" -> "batch_normalization".
std::string ToSnakeCase(absl::string_view name);

}  // namespace cohort::keras::internal
