#pragma once

// The gRPC face of JobService (proto/cohort/v1/job_service.proto) for clients.
//
// Every call is first authorized (server/auth.h): the caller's identity owns the jobs
// it submits and the data it uploads. A user sees (GetJob, ListJobs, WatchJob,
// DownloadArtifact) and cancels only its own jobs and may name only artifacts it
// uploaded itself; an admin every job and artifact (PERMISSION_DENIED otherwise).
// Without authentication every caller is "local", an admin.
//
// SubmitJob validates (server/job_validator.h), refuses when --max-queued-jobs jobs are
// already queued or running, or the caller has --max-queued-jobs-per-user of them
// (RESOURCE_EXHAUSTED), stores an inline model as an upload artifact, then the job (the
// job store answers a repeated idempotency key with the first job), and wakes the
// scheduler. dry_run validates only and answers the resolved spec with no id.
// UploadData refuses an upload that would take the caller past
// --max-upload-bytes-per-user (RESOURCE_EXHAUSTED; checked against the declared size
// before any byte is stored and against the real size at the end).
// WatchJob sends stored events after after_sequence, then new ones as they are stored,
// and ends after the event that made the job final (at once for a job already final
// and fully sent); each stream waits on its own job (server/watch_hub.h). At most
// --max-watches streams are open at once (RESOURCE_EXHAUSTED beyond): the gRPC sync
// server gives every open stream a thread of its own, so the bound keeps watchers from
// taking an unbounded number of threads and their memory. DownloadArtifact streams a
// job's artifact from an offset; model.keras only once the job SUCCEEDED
// (FAILED_PRECONDITION before).

#include <atomic>
#include <cstdint>

#include "cohort/v1/job_service.grpc.pb.h"
#include "server/artifact_store.h"
#include "server/auth.h"
#include "server/job_manager.h"
#include "server/job_store.h"
#include "server/job_validator.h"
#include "server/upload_ledger.h"

namespace cohort::server {

struct JobServiceOptions {
  int64_t max_queued_jobs = 10000;          // --max-queued-jobs
  int64_t max_queued_jobs_per_user = 0;     // --max-queued-jobs-per-user; 0: no limit
  int64_t max_upload_bytes_per_user = 0;    // --max-upload-bytes-per-user; 0: no limit
  int64_t max_watches = 1000;               // --max-watches: WatchJob streams open at once
};

class JobServiceImpl final : public v1::JobService::Service {
 public:
  // Everything passed must outlive the service.
  JobServiceImpl(JobStore* store, ArtifactStore* artifacts, const JobValidator* validator,
                 JobManager* manager, const Authorizer* authorizer, UploadLedger* uploads,
                 JobServiceOptions options)
      : store_(store), artifacts_(artifacts), validator_(validator), manager_(manager),
        authorizer_(authorizer), uploads_(uploads), options_(options) {}

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::Job* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status UploadData(grpc::ServerContext* context, grpc::ServerReader<v1::UploadChunk>* reader,
                          v1::UploadDataResponse* response) override;
  grpc::Status DownloadArtifact(grpc::ServerContext* context,
                                const v1::DownloadArtifactRequest* request,
                                grpc::ServerWriter<v1::DataChunk>* writer) override;

 private:
  absl::StatusOr<v1::Job> Submit(const v1::SubmitJobRequest& request, const Caller& caller);
  // The job `id` when `caller` may see it.
  absl::StatusOr<v1::Job> VisibleJob(const Caller& caller, const std::string& id);
  // --max-upload-bytes-per-user: whether `bytes` more fit (an early check, before an
  // upload's bytes are stored), and the record of an upload that fits (the check that
  // counts, atomic with the record).
  absl::Status CheckUploadQuota(const std::string& owner, int64_t bytes);
  absl::Status RecordUpload(const std::string& owner, const std::string& id, int64_t bytes);
  absl::Status QuotaError(const std::string& owner, int64_t used, int64_t bytes);
  // PERMISSION_DENIED for an artifact the spec names that `caller` did not upload.
  absl::Status CheckArtifactsOwned(const Caller& caller, const v1::JobSpec& spec);

  JobStore* const store_;
  ArtifactStore* const artifacts_;
  const JobValidator* const validator_;
  JobManager* const manager_;
  const Authorizer* const authorizer_;
  UploadLedger* const uploads_;
  const JobServiceOptions options_;
  std::atomic<int64_t> watches_{0};  // WatchJob streams open now
};

}  // namespace cohort::server
