#pragma once

// Internal to common/keras: the small serialized Keras objects that layer configs hold
// (activations, initializers, dtype policies), read into IR values.

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/keras/json_reader.h"
#include "common/keras/model_ir.h"

namespace cohort::keras::internal {

// Field `key` as an activation: a name ("relu", "swish"), a serialized function
// ({"class_name": "function", "config": "relu", ...}), or null/absent for linear.
absl::StatusOr<Activation> ReadActivation(const FieldReader& fields, absl::string_view key);

// Field `key` as an initializer: a serialized initializer object or a name
// ("glorot_uniform", "GlorotUniform", "zeros", ...); `fallback` when absent or null.
absl::StatusOr<Initializer> ReadInitializer(const FieldReader& fields, absl::string_view key,
                                            const Initializer& fallback);

// Refuses a layer whose dtype policy (field "dtype") is not float32: Cohort computes
// in float32 only.
absl::Status CheckFloat32Policy(const FieldReader& fields);

// The dtype named by field `key` (an InputLayer's "dtype"); float32 when absent.
absl::StatusOr<DType> ReadDType(const FieldReader& fields, absl::string_view key);

}  // namespace cohort::keras::internal
