#pragma once

// Reads a Keras 3 model config — the `config.json` of a `.keras` file, byte for byte
// what `model.to_json()` returns apart from shared_object_id fields — into the model
// IR (common/keras/model_ir.h), with every node's shape inferred, its weights laid out
// as Keras writes them, and the limits checked. Needs no LibTorch: the coordinator
// validates jobs with it at submit, and the trainer builds its modules from its result.
//
// Accepted: Sequential and Functional models with one input and one output, built from
// the classes of LayerClass, and the file's compile_config (common/keras/compile_config.h).
// Refused with InvalidArgument, the message naming the layer's name and class and
// safe to show users:
//   - layer classes Cohort does not support ("layer 'lstm_1' has class LSTM, which
//     Cohort does not support; supported: InputLayer, Dense, ..."), custom classes;
//   - options that would change results and are not supported (channels_first,
//     regularizers, constraints, mask_zero=True, a non-float32 dtype policy, ...);
//   - Keras 2 (tf.keras) configs (batch_input_shape, list-style inbound_nodes);
//   - nested models, shared layers (a layer called more than once), several inputs
//     or outputs, layers that do not lead from the input to the output;
//   - inconsistent shapes, and models past `limits` (parameters, activation size,
//     layer count);
//   - text that is not JSON, truncated, or holds fields of the wrong type.
// Never throws, whatever the bytes. Thread-safe (a pure function).

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/keras/model_ir.h"
#include "common/keras/shape_inference.h"

namespace cohort::keras {

absl::StatusOr<ModelIr> ParseModelConfig(absl::string_view json, const ModelLimits& limits = {});

}  // namespace cohort::keras
