#pragma once

// The job spec: everything a training job needs, as typed values. `cohort-worker
// train JOB.yaml` reads it from YAML (job_spec_yaml.h); the coordinator converts it to
// and from the proto message cohort.v1.JobSpec, which has the same fields with the
// same meanings (docs/job-spec.md). Free of protobuf and LibTorch. Plain values, safe
// to copy and share between threads.
//
// Paths are absolute (the YAML parser resolves them against the YAML file's
// directory). Whether the files exist is not checked here: the coordinator and the
// trainer check the model and the data when they open them.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/job/compile_overrides.h"
#include "common/job/field_error.h"

namespace cohort::job {

// An array: a .npy file, or the member `key` of an .npz file (cohort.v1.ArrayRef with
// `path` set).
struct ArrayRef {
  std::string path;
  std::string key;  // the .npz member; empty for a .npy file

  bool operator==(const ArrayRef&) const = default;
};

// The model file: a .keras archive (cohort.v1.JobSpec.keras_path) or a file holding
// the JSON of model.to_json() (config_json_path).
enum class ModelFormat { kKeras, kJson };

struct ModelRef {
  ModelFormat format = ModelFormat::kKeras;  // follows the path's extension
  std::string path;

  bool operator==(const ModelRef&) const = default;
};

struct DataSpec {
  ArrayRef x;
  ArrayRef y;
  // Validation data (both or neither), or a validation split: the last fraction of the
  // rows, taken before shuffling, as Keras does. Not both; 0 is no split.
  std::optional<ArrayRef> validation_x;
  std::optional<ArrayRef> validation_y;
  double validation_split = 0.0;  // in [0, 1)

  bool operator==(const DataSpec&) const = default;
};

// What the layers compute in. Keras' dtype policy names: float32, or mixed_bfloat16
// (variables, optimizer and loss in float32; the layers' products and convolutions in
// bfloat16 with float32 sums: LibTorch autocast, on CPU and CUDA).
enum class Precision { kFloat32, kMixedBfloat16 };
absl::string_view PrecisionName(Precision precision);  // "float32", "mixed_bfloat16"
// The precision a name names, or InvalidArgument "'NAME' is not supported; supported:
// float32, mixed_bfloat16" (the YAML field or the CLI flag goes before it).
absl::StatusOr<Precision> PrecisionFromName(absl::string_view name);

// Keras' fit() defaults.
struct FitSpec {
  int32_t epochs = 1;
  int64_t batch_size = 32;  // the global batch: all ranks together
  bool shuffle = true;
  uint64_t seed = 0;
  Precision precision = Precision::kFloat32;

  bool operator==(const FitSpec&) const = default;
};

enum class Device { kCpu, kCuda };
absl::string_view DeviceName(Device device);  // "cpu", "cuda"

// `workers` ranks, each on one slot of `device` (a CPU slot or one GPU), all started
// together or not at all.
struct ResourcesSpec {
  int32_t workers = 1;
  Device device = Device::kCpu;

  bool operator==(const ResourcesSpec&) const = default;
};

struct CheckpointSpec {
  int32_t every_epochs = 1;  // 0: only at the end
  int32_t keep = 2;          // the newest `keep` checkpoints are kept

  bool operator==(const CheckpointSpec&) const = default;
};

struct JobSpec {
  std::string name;  // common/names.h CheckName
  ModelRef model;
  DataSpec data;
  FitSpec fit;
  CompileOverrides compile;
  ResourcesSpec resources;
  CheckpointSpec checkpoint;
  int32_t max_restarts = 3;  // attempts after the first
  int32_t priority = 0;      // higher first; FIFO among equals
  // Every rank records a step timeline (`cohort trace JOB`, docs/observability.md).
  bool trace = false;

  bool operator==(const JobSpec&) const = default;
};

// Every check that needs no file: the name, paths present with the right extensions
// (.keras/.json, .npy or .npz with a key), ranges, validation data vs split,
// fit.batch_size divisible by resources.workers, and ValidateCompileOverrides.
// OK, or INVALID_ARGUMENT "<field>: <problem>", with the YAML line when `lines` has it.
absl::Status ValidateJobSpec(const JobSpec& spec, const FieldLines& lines = {});

}  // namespace cohort::job
