#pragma once

// JobValidator: everything SubmitJob checks before a job is stored (DESIGN.md: "a bad
// job is refused in milliseconds ... not after scheduling").
//
// Validate() checks, in order, and stops at the first problem:
//   - the spec itself (proto::JobSpecFromProto: names, ranges, extensions, batch size
//     divisible by the ranks, compile overrides), artifact ids resolved against the
//     artifact store (an unknown id: INVALID_ARGUMENT "data.x: artifact '...' not found");
//   - the paths the request names (model and data): absolute, and inside the
//     --allowed-data-root folders when there are any (symlinks and ".." resolved);
//   - the model: an inline .keras file or JSON (size up to --max-model-bytes, else
//     RESOURCE_EXHAUSTED), a path, or an uploaded artifact; its config.json parsed with
//     keras::ParseModelConfig ("model: layer 'lstm' has class LSTM, ...") within
//     limits.model (layers, parameters, per-sample layer outputs);
//   - the compile settings resolved over the file's compile_config (a loss must exist);
//   - the data: every array opened (headers parsed, sizes checked; .npy memory-mapped),
//     keras::CheckData for x/y and the validation arrays, the label range for sparse
//     categorical crossentropy and the token range for an Embedding input (these read
//     the values), and what a validation split leaves;
//   - the activations a step keeps on one rank (keras::CheckStepActivations with the
//     per-rank batch) within limits.max_step_activation_elements (RESOURCE_EXHAUSTED);
//   - the resources: that the cluster as registered (every known worker, whatever its
//     state) could ever hold the ranks; with no worker known at all the job is accepted
//     and waits.
// Every refusal is INVALID_ARGUMENT (RESOURCE_EXHAUSTED for size limits) with a
// message that starts with the field: "data.x: layer 'dense' expects 64 features, data
// has 63".
//
// Thread safety: Validate may be called from any thread concurrently; it reads files
// and stores nothing.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/v1/types.pb.h"
#include "common/job/job_spec.h"
#include "common/keras/shape_inference.h"
#include "common/path_roots.h"
#include "server/artifact_store.h"
#include "server/scheduler.h"

namespace cohort::server {

struct ValidatedJob {
  // What the job store keeps: the request's spec with its name set and an inline model
  // replaced by model_artifact_id (the caller stores `inline_model` under that id).
  v1::JobSpec stored;
  // The spec with every default and the compile settings resolved (dry_run's answer);
  // artifact ids stay ids.
  v1::JobSpec resolved;
  std::string inline_model;      // the inline model's bytes; empty when not inline
  std::string inline_extension;  // "keras" or "json" when inline
};

// What a job may ask for. The defaults are cohort-server's flags' defaults
// (docs/reliability.md).
struct JobLimits {
  // --max-model-layers, --max-model-parameters, --max-layer-output-elements
  keras::ModelLimits model;
  // --max-step-activation-elements: 2^32 float32 elements are 16 GiB on one rank.
  int64_t max_step_activation_elements = int64_t{1} << 32;
  PathRoots data_roots;  // --allowed-data-root; none: any absolute path
};

class JobValidator {
 public:
  // The cluster's capacity as registered (total slots; free ones do not matter here).
  using ClusterView = std::function<std::vector<WorkerCapacity>()>;

  // `artifacts` must outlive the validator.
  JobValidator(const ArtifactStore* artifacts, ClusterView cluster, JobLimits limits = {})
      : artifacts_(artifacts), cluster_(std::move(cluster)), limits_(std::move(limits)) {}

  absl::StatusOr<ValidatedJob> Validate(const v1::JobSpec& spec) const;

 private:
  absl::StatusOr<std::string> ModelConfigJson(const v1::JobSpec& spec,
                                              const job::JobSpec& typed) const;
  absl::Status CheckResources(const job::JobSpec& typed) const;

  const ArtifactStore* const artifacts_;
  const ClusterView cluster_;
  const JobLimits limits_;
};

}  // namespace cohort::server
