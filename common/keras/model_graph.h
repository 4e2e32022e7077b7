#pragma once

// Internal to common/keras: the "layers" list of a Sequential or Functional config
// read into IR nodes (shapes and weights not yet filled in).

#include <vector>

#include "absl/status/statusor.h"
#include "common/keras/json_reader.h"
#include "common/keras/model_ir.h"
#include "common/keras/shape_inference.h"

namespace cohort::keras::internal {

// One entry of a "layers" list: name, trainable flag and typed config. `index` is the
// entry's position, for messages about entries without a name.
absl::StatusOr<Node> ParseLayerEntry(const Json& entry, size_t index);

// The nodes of a model, inputs filled in, in Keras' model.layers order (which is
// topological, the InputLayer first and the output last; a Sequential model's
// InputLayer is not in its model.layers but comes first all the same). `model_config`
// reads the model's "config" object.
absl::StatusOr<std::vector<Node>> ParseSequentialGraph(const FieldReader& model_config,
                                                       const ModelLimits& limits);
absl::StatusOr<std::vector<Node>> ParseFunctionalGraph(const FieldReader& model_config,
                                                       const ModelLimits& limits);

// The model's "layers" list, checked to be a list within limits.max_layers.
absl::StatusOr<const Json*> LayerList(const FieldReader& model_config, const ModelLimits& limits);

// The message for a config in Keras 2 (tf.keras) format; `sign` says what gave it away.
absl::Status Keras2Error(absl::string_view sign);

}  // namespace cohort::keras::internal
