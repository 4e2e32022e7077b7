#pragma once

// Files between the agent and the coordinator (docs/job-protocol.md rules 6-8):
//
// - DataCache: data and model artifacts a job names by id, fetched with
//   WorkerService.FetchData into DIR/<artifact_id>, checked against the assignment's
//   size and SHA-256 (common/transfer ReceivedFile: a broken or tampered fetch leaves
//   nothing at the path), and kept: a later job naming the same id uses the file as it
//   is. A broken stream resumes from the bytes already received.
// - UploadArtifact: one of a job's outputs (model.keras, history.json,
//   checkpoints/<file>) to WorkerService.UploadArtifact, with its size and SHA-256.
// - DownloadJobArtifact: JobService.DownloadArtifact into a local file (a checkpoint to
//   resume from), size-checked.
//
// Errors name the artifact. Transient gRPC errors (UNAVAILABLE, DEADLINE_EXCEEDED,
// ABORTED from a dropped stream) are retried `attempts` times with backoff; a
// CallCanceller cancels a transfer in flight (CANCELLED). Thread-safe: DataCache
// serializes fetches of one id, so two ranks needing it fetch it once.

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "cohort/v1/worker_service.grpc.pb.h"
#include "worker/agent/call_canceller.h"

namespace cohort::agent {

struct TransferOptions {
  int attempts = 5;
  absl::Duration max_backoff = absl::Seconds(2);
  // A whole transfer (one stream) must end within this.
  absl::Duration stream_timeout = absl::Minutes(30);
};

// INVALID_ARGUMENT unless `name` is one safe path component (no '/', not "." or "..",
// no NUL, not empty, at most 255 bytes): ids and file names from the wire become paths.
absl::Status CheckFileName(absl::string_view name, absl::string_view what);

class DataCache {
 public:
  // `dir` is created if missing. `stub` is not owned and must outlive the cache.
  DataCache(std::string dir, v1::WorkerService::StubInterface* stub, TransferOptions options = {});

  // The local path of the artifact, fetching it first unless the cache holds a file of
  // its size. DATA_LOSS when the fetched bytes do not match its sha256.
  absl::StatusOr<std::string> Fetch(const v1::DataArtifact& artifact,
                                    CallCanceller* canceller = nullptr);

  std::string PathOf(const std::string& artifact_id) const { return dir_ + "/" + artifact_id; }

 private:
  absl::Status FetchInto(const v1::DataArtifact& artifact, const std::string& path,
                         CallCanceller* canceller);

  const std::string dir_;
  v1::WorkerService::StubInterface* const stub_;
  const TransferOptions options_;
  absl::Mutex mu_;
  // One lock per artifact id being fetched; shared_ptr: the map and the fetching
  // threads hold it together.
  std::map<std::string, std::shared_ptr<absl::Mutex>> fetching_ ABSL_GUARDED_BY(mu_);
};

absl::Status UploadArtifact(v1::WorkerService::StubInterface* stub, const v1::RankRef& rank,
                            const std::string& name, const std::string& path,
                            TransferOptions options = {});

absl::Status DownloadJobArtifact(v1::JobService::StubInterface* stub, const std::string& job_id,
                                 const std::string& name, const std::string& path,
                                 TransferOptions options = {}, CallCanceller* canceller = nullptr);

}  // namespace cohort::agent
