#pragma once

// Internal to common/keras: one layer's Keras `config` object read into its typed
// LayerConfig. Axis fields keep Keras' values (possibly negative); the model parser
// resolves them once input ranks are known.

#include "absl/status/statusor.h"
#include "common/keras/json_reader.h"
#include "common/keras/model_ir.h"

namespace cohort::keras::internal {

// `config` reads the layer's config object with the layer's name and class as its
// context. Unsupported options are refused with InvalidArgument naming the field.
absl::StatusOr<LayerConfig> ParseLayerConfig(LayerClass layer_class, const FieldReader& config);

}  // namespace cohort::keras::internal
