#pragma once

// Fixtures for the Keras weights tests, made at test time by keras_weights_fixture.py
// with the project virtualenv's Keras, h5py and numpy (see that script for what each
// command writes). Each is made once per test process, in a temporary directory.

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "worker/trainer/weights/keras_weights.h"

namespace cohort::testing {

inline const std::vector<std::string> kKerasFixtureModels = {"mlp", "cnn", "residual",
                                                             "embedding"};

// Runs `keras_weights_fixture.py <command> <dir>` with KERAS_BACKEND=jax.
CommandResult RunKerasFixtureScript(const std::string& command, const std::string& dir);

// `make`'s output: <model>.keras, <model>.weights.h5, <model>.json and its .bin files.
const std::string& KerasModelsDir();
// `bad`'s output: malformed *.weights.h5 files.
const std::string& BadWeightsDir();

// What Keras held in memory for one model when it saved it (from <model>.json).
struct ExpectedVariable {
  std::vector<int64_t> shape;
  std::string dtype;            // numpy's name: "float32", "int32", "int64"
  std::vector<float> floats;    // float32 values
  std::vector<int64_t> ints;    // integer values
};
struct ExpectedLayer {
  std::string class_name;
  std::string name;
  std::vector<ExpectedVariable> variables;  // layer.get_weights()
};
struct ExpectedModel {
  std::string model_name;
  std::vector<ExpectedLayer> layers;  // model.layers
  std::string optimizer_name;
  std::vector<ExpectedVariable> optimizer;  // model.optimizer.variables
};
ExpectedModel LoadExpectedModel(const std::string& dir, const std::string& model);

// CHECKs that two weights files hold the same groups, names and variables.
void CheckSameWeights(const trainer::KerasWeights& a, const trainer::KerasWeights& b);

}  // namespace cohort::testing
