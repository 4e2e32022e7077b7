#pragma once

// Shape inference over the model IR, with Keras' rules (keras/src/ops/operation_utils.py
// and each layer's compute_output_shape), and the size limits that keep a hostile or
// mistaken config from exhausting memory later.
//
// Pure functions of their arguments: any thread may call them.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/keras/model_ir.h"
#include "common/keras/shape.h"

namespace cohort::keras {

struct ModelLimits {
  // Most parameters a model may have (Keras' count_params(): trainable or not).
  int64_t max_parameters = int64_t{1} << 31;
  // Most elements one layer's output may hold for one sample.
  int64_t max_activation_elements = int64_t{1} << 28;
  // Most layers a config may list.
  int64_t max_layers = 10000;
};

// The output shape of every node (indexed like model.nodes) when the model's input
// has per-sample shape `input_shape`: the model's own input shape, or that shape with
// its unknown dimensions filled in (from the data, say). Refuses, with InvalidArgument
// naming the layer, shapes Keras would refuse, e.g.
//   "layer 'add' (Add) gets inputs of shapes (8, 8, 16) and (8, 8, 32), which cannot
//    be added"
// and outputs with more than limits.max_activation_elements known elements. Node
// configs may hold Keras' negative axes or resolved ones.
absl::StatusOr<std::vector<Shape>> InferShapes(const ModelIr& model, const Shape& input_shape,
                                               const ModelLimits& limits = {});

}  // namespace cohort::keras
