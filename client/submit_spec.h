#pragma once

// `cohort submit`'s flags turned into a job spec: the flags mirror model.fit and
// model.compile, and ResolveSubmitSpec applies them onto a JOB.yaml (job::LoadJobSpec)
// or onto a bare MODEL.keras / MODEL.json with Keras' defaults. A pure function of the
// flags and the working directory, apart from reading the YAML file.
//
// Compile flags go into the spec's compile overrides (common/job/compile_overrides.h):
// what a flag does not set stays as the model file's compile_config has it, resolved
// where the model is read (the coordinator's check and the trainer).
//
// Errors are INVALID_ARGUMENT and name the flag ("--epochs: must be an integer >= 1,
// got 'ten'") or the spec field job::ValidateJobSpec names; `cohort` exits 2 on them.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/job_spec.h"

namespace cohort::client {

// Every flag as typed on the command line; nullopt when not given.
struct SubmitFlags {
  std::string target;  // JOB.yaml (or .yml), MODEL.keras or MODEL.json
  std::optional<std::string> name;

  // Data: .npy files, or .npz files with the member named by the *key flags.
  std::optional<std::string> x, y, validation_x, validation_y;
  std::optional<std::string> x_key, y_key, validation_x_key, validation_y_key;
  std::optional<std::string> validation_split;

  // model.fit
  std::optional<std::string> epochs, batch_size, seed, precision;
  std::optional<bool> shuffle;

  // model.compile
  std::optional<std::string> optimizer, learning_rate, loss;
  std::optional<bool> from_logits;
  std::optional<std::vector<std::string>> metrics;  // comma-separated or repeated

  // Resources and the job's lifetime.
  std::optional<std::string> workers, device, priority, max_restarts;
  std::optional<std::string> checkpoint_every, checkpoint_keep;
  std::optional<bool> trace;  // --trace
};

// The spec the flags describe, validated with job::ValidateJobSpec. Relative paths are
// made absolute against `cwd` (a JOB.yaml's own paths against its directory). The name
// defaults to the YAML's name, else the model file's stem with characters a job name
// cannot hold replaced by '-'.
absl::StatusOr<job::JobSpec> ResolveSubmitSpec(const SubmitFlags& flags, const std::string& cwd);

// `path` made absolute against `cwd` and normalized lexically ("a/../b" -> "b").
std::string AbsolutePath(const std::string& path, const std::string& cwd);

}  // namespace cohort::client
