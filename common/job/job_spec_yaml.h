#pragma once

// The YAML form of a job spec (docs/job-spec.md): what `cohort-worker train JOB.yaml`
// reads and `cohort submit --dry-run` prints. Stateless functions, callable from any
// thread. They never throw: yaml-cpp's exceptions are caught here.
//
// Errors are INVALID_ARGUMENT "<field>: <problem> (line N)", e.g.
//   fit.batch_size: must be a positive integer, got 'abc' (line 7)
//   fit.epoch: unknown field (did you mean 'epochs'?) (line 6)
//   data.validation_split: cannot be combined with data.validation_x (line 9)
// Unknown and repeated fields are errors. Files are not opened, except the YAML file
// itself by LoadJobSpec.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/job/job_spec.h"

namespace cohort::job {

// A job spec is at most this long; anything longer is refused unparsed.
inline constexpr size_t kMaxJobSpecBytes = 1 << 20;

// Parses `yaml` and runs ValidateJobSpec. Relative paths in it are resolved against
// `base_dir` (made absolute against the working directory when relative itself) and
// normalized. `default_name` is the job's name when the YAML sets none.
absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view yaml, const std::string& base_dir,
                                     absl::string_view default_name);

// Reads the file at `path` and parses it with base_dir = the file's directory and
// default_name = its stem ("jobs/digits.yaml" -> "digits"). Errors are prefixed with
// the path; an unreadable file is NOT_FOUND.
absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path);

// The spec as YAML, every field explicit (defaults included, paths absolute), in the
// order of docs/job-spec.md. ParseJobSpec of the result gives back an equal JobSpec
// for any spec that passes ValidateJobSpec.
std::string JobSpecToYaml(const JobSpec& spec);

}  // namespace cohort::job
