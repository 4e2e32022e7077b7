#pragma once

// Keras 3 `model.weights.h5` files (the weights inside a `.keras` zip, or what
// `model.save_weights("x.weights.h5")` writes), read and written with the HDF5 C API
// on plain float buffers, entirely in memory.
//
// The layout, as Keras 3.15 writes it (keras/src/saving/saving_lib.py, checked with
// h5py on real files):
//
//   /                                     no attributes
//   ├── vars                              the model's own group; attr name="sequential"
//   ├── layers
//   │   ├── input_layer/vars              Functional models only; attr name, no datasets
//   │   ├── conv2d/vars                   attr name="conv2d"; datasets 0 kernel, 1 bias
//   │   ├── batch_normalization/vars      0 gamma, 1 beta, 2 moving_mean, 3 moving_var
//   │   ├── flatten/vars                  every layer has a group, weights or not
//   │   ├── dense/vars                    attr name="dense_4" (the layer's own name)
//   │   ├── dense_1/vars
//   │   └── sequential/                   a nested model recurses:
//   │       ├── vars                        attr name="inner"
//   │       └── layers/dense/vars
//   └── optimizer/vars                    compiled models: attr name="adam"
//
// - Group names come from the attribute path, not the layer name: `layers/` then the
//   snake_case of the class name ("Conv2D" -> "conv2d", "BatchNormalization" ->
//   "batch_normalization"), with `_1`, `_2`, ... for the 2nd, 3rd, ... layer of the same
//   class in `model.layers` order (see KerasLayerGroupPaths). `model.layers` holds the
//   InputLayer in Functional models and not in Sequential ones.
// - Every saveable gets a `vars` group with one attribute, `name`: a variable-length
//   UTF-8 string in a scalar dataspace. Its datasets are named "0", "1", ... in the
//   layer's variable order (trainable, then non-trainable, in creation order): Dense
//   kernel (in, units) then bias; Conv kernel (k..., in/groups, filters) then bias;
//   Embedding embeddings (input_dim, output_dim).
// - Datasets: little-endian IEEE float32 (the variable's dtype), contiguous, no
//   chunking, no compression, no fill value, no attributes; scalars use a scalar
//   dataspace. Groups and datasets do not track times. Superblock version 0 (HDF5's
//   default "earliest" format), no user block.
// - optimizer/vars (Adam, SGD, RMSprop, ...): 0 `iteration` (scalar int32 with the JAX
//   backend, int64 with TensorFlow/torch), 1 `learning_rate` (scalar float32) unless the
//   rate is a schedule, then the slots of the trainable variables of the model in
//   `model.trainable_variables` order. Adam: momentum and velocity interleaved per
//   variable (m0, v0, m1, v1, ...), then with amsgrad every velocity_hat; SGD: one
//   momentum per variable when momentum > 0, otherwise nothing (the group holds just 0
//   and 1); RMSprop: every velocity, then every momentum, then every average_gradient.
//   Keras silently skips loading optimizer state whose variable count differs.
// - Nothing else: compiled losses and metrics save no state. Uncompiled models have no
//   optimizer group; compiled ones not yet trained have just 0 and 1 in it (the slots
//   are built at the first step).
// What WriteKerasWeights builds matches this property for property (h5py compares
// every group, attribute and dataset in the tests); the bytes differ from h5py's only
// in where HDF5 places its blocks.
//
// Who owns what: every function returns values the caller owns; nothing is kept.
// Threads: any thread may call any function; the HDF5 work inside is serialized by one
// process-wide lock. Errors: messages name the file (KerasWeights::file_name) and the
// object, and are safe to show users.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort::trainer {

inline constexpr char kKerasWeightsFileName[] = "model.weights.h5";
inline constexpr char kOptimizerGroupPrefix[] = "optimizer/";

// How a variable is stored. Layer variables are always float (float64 datasets are
// read as float32); integers occur only in optimizer groups (the iteration counter).
enum class KerasDType { kFloat32, kInt32, kInt64 };

// One dataset of a `vars` group: a variable's value in row-major (C) order.
struct KerasVariable {
  std::vector<int64_t> shape;  // {} for a scalar
  KerasDType dtype = KerasDType::kFloat32;
  std::vector<float> values;        // when dtype is kFloat32: product(shape) values
  std::vector<int64_t> int_values;  // when dtype is kInt32 or kInt64: product(shape)
};

// One `vars` group: the variables of one layer (or of the model, or the optimizer).
struct KerasVarGroup {
  std::string path;  // "layers/dense_1/vars", "vars", "optimizer/vars"
  std::string name;  // its `name` attribute: the layer's name ("dense_3"); "" if none
  std::vector<KerasVariable> variables;  // dataset "i" is variables[i]
};

// A whole weights file.
struct KerasWeights {
  std::string file_name = kKerasWeightsFileName;  // used in error messages
  // Every `vars` group outside optimizer/, sorted by path, empty ones included.
  std::vector<KerasVarGroup> groups;
  // Every `vars` group under optimizer/ ("optimizer/vars" for the built-in
  // optimizers); empty for models saved uncompiled.
  std::vector<KerasVarGroup> optimizer;

  // The group at `path`, in `groups` or `optimizer`. NOT_FOUND names file and path.
  absl::StatusOr<const KerasVarGroup*> FindGroup(absl::string_view path) const;
  // Variable `index` of the group at `path`, checked against the shape the caller's
  // model has: NOT_FOUND when the group or the index is missing, INVALID_ARGUMENT
  // "model.weights.h5: layers/dense/vars/0 has shape (784, 128), the model expects
  // (784, 256)" when the shape differs.
  absl::StatusOr<const KerasVariable*> FindVariable(
      absl::string_view path, size_t index, std::span<const int64_t> expected_shape) const;
};

// Parses a weights file held in memory (usually extracted from a `.keras` zip) without
// touching the disk. `file_name` only labels errors and the result. Refused, with
// INVALID_ARGUMENT naming the object: bytes that are not HDF5 or are truncated or
// corrupt; datasets outside a `vars` group; `vars` groups holding groups or datasets
// not named 0..n-1; soft or external links; dataspaces that are null; datasets of any
// type but float32/float64 (and int32/int64 in optimizer groups); files without any
// `vars` group; files whose reading crashes libhdf5 (which trusts a file's internal
// addresses): a forked child reads the bytes first, and only if it survives are they
// read here.
absl::StatusOr<KerasWeights> ReadKerasWeights(absl::string_view bytes,
                                              absl::string_view file_name = kKerasWeightsFileName);
// Reads the file at `path` and parses it as above; errors name `path`.
absl::StatusOr<KerasWeights> ReadKerasWeightsFile(const std::string& path);

// Builds the bytes of a weights file laid out as Keras writes it (above) from `weights`:
// each group of `groups` and then `optimizer` at its path with its `name` attribute
// (omitted when empty) and its variables as datasets "0", "1", .... Pass what Keras
// would save: a group for every layer (weights or not), the model's "vars" group, and
// the optimizer's variables in Keras' order. INVALID_ARGUMENT, before anything is built,
// when a path is malformed (empty or "."/".." components, a leading "/", not ending in
// "/vars", "vars" before the end), repeated, or an optimizer path does not start with
// "optimizer/" (or a layer path does); when a variable's value count is not
// product(shape); or when an int32 value is out of range.
absl::StatusOr<std::string> WriteKerasWeights(const KerasWeights& weights);

// Keras' naming.to_snake_case: "Conv2D" -> "conv2d", "BatchNormalization" ->
// "batch_normalization", "GlobalAveragePooling1D" -> "global_average_pooling1d".
std::string KerasSnakeCase(absl::string_view class_name);

// The `vars` group path of each layer, given the class names of `model.layers` in
// order: {"Dense", "Dropout", "Dense"} -> {"layers/dense/vars", "layers/dropout/vars",
// "layers/dense_1/vars"}. `prefix` is the path of the container: "layers" for a model,
// "layers/sequential/layers" for the layers of a nested Sequential.
std::vector<std::string> KerasLayerGroupPaths(const std::vector<std::string>& class_names,
                                              absl::string_view prefix = "layers");

// "(784, 128)", "(3,)", "()": a shape as Python prints it, for messages.
std::string FormatShape(std::span<const int64_t> shape);

}  // namespace cohort::trainer
