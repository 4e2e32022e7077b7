#pragma once

// Converts between the job spec's two forms: job::JobSpec (typed, what the YAML parser
// and the trainer use) and cohort.v1.JobSpec (the wire form). They have the same fields
// with the same meanings (docs/job-spec.md); unset proto fields mean the defaults of
// job::JobSpec (Keras' defaults). Stateless functions, callable from any thread.

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "cohort/v1/types.pb.h"
#include "common/job/job_spec.h"

namespace cohort::proto {

// The spec with the model and data referenced by path (keras_path or
// config_json_path, ArrayRef.path). Every field is written, defaults included.
v1::JobSpec JobSpecToProto(const job::JobSpec& spec);

// Maps an artifact id (ArrayRef.artifact_id, JobSpec.model_artifact_id) to the local
// path of its file, or an error that names it.
using ArtifactResolver = std::function<absl::StatusOr<std::string>(const std::string& artifact_id)>;

// The typed spec, checked with job::ValidateJobSpec: INVALID_ARGUMENT naming the field
// ("fit.batch_size: ..."), as the YAML parser names it. Artifact ids are replaced by
// the paths `resolve` gives (an empty `resolve` refuses them). A model still inline
// (keras_file, config_json) is INVALID_ARGUMENT: the coordinator stores it as an
// artifact first. An unset name becomes `default_name`.
absl::StatusOr<job::JobSpec> JobSpecFromProto(const v1::JobSpec& spec,
                                              const ArtifactResolver& resolve,
                                              const std::string& default_name = "job");

}  // namespace cohort::proto
