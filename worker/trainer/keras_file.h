#pragma once

// Reading a user's model and writing the trained one, as Keras 3 files.
//
// A model comes as a `.keras` zip (config.json, model.weights.h5, metadata.json) or as
// the JSON of `model.to_json()` (any other extension). The trained model is written as
// a `.keras` zip laid out as Keras writes it (entries stored, not deflated), atomically:
// it appears complete at `path` or not at all. Torch-free.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/keras/model_config.h"
#include "worker/trainer/weights/keras_weights.h"

namespace cohort::trainer {

struct KerasModelFile {
  std::string config_json;  // config.json as it was, or the to_json() text
  keras::ModelIr ir;
  std::optional<KerasWeights> weights;  // when the file carries weights
  std::string keras_version;            // from metadata.json; empty for JSON files
};

// Errors name `path` and what is wrong in it (not a zip, no config.json, bad layers).
absl::StatusOr<KerasModelFile> LoadKerasModel(const std::string& path,
                                              const keras::ModelLimits& limits = {});

// Writes `path` (a .keras zip) with `config_json`, `weights` and a metadata.json
// naming `keras_version` (Keras reads any 3.x) and the time saved.
absl::Status WriteKerasModel(const std::string& path, const std::string& config_json,
                             const KerasWeights& weights, const std::string& keras_version);

}  // namespace cohort::trainer
