#include "server/job_service.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/transfer/file_chunks.h"
#include "proto/grpc_status.h"
#include "server/receive_chunks.h"

namespace cohort::server {
namespace {

constexpr int32_t kWatchBatch = 500;

std::string Owner(const grpc::ServerContext* context) {
  auto it = context->client_metadata().find("x-cohort-user");
  if (it == context->client_metadata().end() || it->second.empty()) return "local";
  return std::string(it->second.data(), it->second.size());
}

bool EndsJob(const v1::JobEvent& e) {
  return e.has_state_change() && JobStore::IsFinal(e.state_change().to());
}

}  // namespace

absl::StatusOr<v1::Job> JobServiceImpl::Submit(const v1::SubmitJobRequest& request,
                                               const std::string& owner) {
  absl::StatusOr<ValidatedJob> valid = validator_->Validate(request.spec());
  if (!valid.ok()) return valid.status();
  if (request.dry_run()) {
    v1::Job job;
    *job.mutable_spec() = valid->resolved;
    job.set_owner(owner);
    return job;
  }
  absl::StatusOr<int64_t> active = store_->CountActive();
  if (!active.ok()) return active.status();
  if (*active >= options_.max_queued_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the queue is full: ", *active, " jobs are queued or running (--max-queued-jobs ",
        options_.max_queued_jobs, "); submit again later"));
  }
  if (!valid->inline_model.empty()) {
    absl::StatusOr<std::string> id = artifacts_->PutUpload(valid->inline_extension, valid->inline_model);
    if (!id.ok()) return id.status();
    valid->stored.set_model_artifact_id(*id);
  }
  absl::StatusOr<v1::Job> job = store_->Insert(valid->stored, request.idempotency_key(), owner);
  if (!job.ok()) return job.status();
  spdlog::info("job {} submitted by {}", job->id(), owner);
  manager_->NotifyEvents();
  manager_->Wake();
  return job;
}

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* context,
                                       const v1::SubmitJobRequest* request,
                                       v1::SubmitJobResponse* response) {
  absl::StatusOr<v1::Job> job = Submit(*request, Owner(context));
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                                    v1::Job* response) {
  absl::StatusOr<v1::Job> job = store_->Get(request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                                      v1::ListJobsResponse* response) {
  std::vector<v1::JobState> states;
  for (int s : request->states()) states.push_back(static_cast<v1::JobState>(s));
  absl::StatusOr<v1::ListJobsResponse> list =
      store_->List(states, request->page_size(), request->page_token());
  if (!list.ok()) return ToGrpcStatus(list.status());
  *response = *std::move(list);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* context,
                                       const v1::CancelJobRequest* request, v1::Job* response) {
  std::string reason = request->reason().empty()
                           ? absl::StrCat("cancelled by ", Owner(context))
                           : request->reason();
  absl::StatusOr<v1::Job> job = manager_->Cancel(request->job_id(), reason);
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* context,
                                      const v1::WatchJobRequest* request,
                                      grpc::ServerWriter<v1::JobEvent>* writer) {
  int64_t after = std::max<int64_t>(0, request->after_sequence());
  while (true) {
    uint64_t generation = manager_->EventGeneration();
    absl::StatusOr<std::vector<v1::JobEvent>> events =
        store_->Events(request->job_id(), after, kWatchBatch);
    if (!events.ok()) return ToGrpcStatus(events.status());
    for (const v1::JobEvent& e : *events) {
      if (!writer->Write(e)) return grpc::Status(grpc::StatusCode::CANCELLED, "watcher went away");
      after = e.sequence();
      if (EndsJob(e)) return grpc::Status::OK;
    }
    if (static_cast<int32_t>(events->size()) == kWatchBatch) continue;
    absl::StatusOr<v1::Job> job = store_->Get(request->job_id());
    if (!job.ok()) return ToGrpcStatus(job.status());
    // Nothing more will come: the final event was before after_sequence.
    if (JobStore::IsFinal(job->state()) && job->last_sequence() <= after) return grpc::Status::OK;
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "watcher went away");
    if (manager_->stopping()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
    }
    manager_->WaitForEvents(generation, absl::Milliseconds(500));
  }
}

grpc::Status JobServiceImpl::UploadData(grpc::ServerContext*,
                                        grpc::ServerReader<v1::UploadChunk>* reader,
                                        v1::UploadDataResponse* response) {
  v1::UploadChunk chunk;
  if (!reader->Read(&chunk)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "upload: no chunks were sent");
  }
  if (!chunk.has_header()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "upload: the first chunk must carry the header");
  }
  const v1::UploadHeader& h = chunk.header();
  absl::StatusOr<v1::ArtifactInfo> info = ReceiveChunks(
      artifacts_->StartUpload(h.file_name(), h.size_bytes() > 0 ? h.size_bytes() : -1, h.sha256()),
      chunk, reader);
  if (!info.ok()) return ToGrpcStatus(info.status());
  response->set_artifact_id(info->name());
  response->set_size_bytes(info->size_bytes());
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::DownloadArtifact(grpc::ServerContext*,
                                              const v1::DownloadArtifactRequest* request,
                                              grpc::ServerWriter<v1::DataChunk>* writer) {
  absl::StatusOr<v1::Job> job = store_->Get(request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  if (absl::Status s = ArtifactStore::CheckJobArtifactName(request->name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (request->name() == "model.keras" && job->state() != v1::JOB_STATE_SUCCEEDED) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("job '", job->id(), "' has not succeeded (it is ",
                                     JobStore::StateName(job->state()),
                                     "): model.keras comes once it has"));
  }
  bool known = false;
  for (const v1::ArtifactInfo& a : job->artifacts()) known = known || a.name() == request->name();
  if (!known) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("job '", job->id(), "' has no artifact '", request->name(), "'"));
  }
  absl::StatusOr<std::string> path = artifacts_->JobArtifactPath(job->id(), request->name());
  if (!path.ok()) return ToGrpcStatus(path.status());
  absl::Status sent = SendFileChunks(
      *path, request->offset(), [&](absl::string_view data, int64_t offset, int64_t total) {
        v1::DataChunk c;
        c.set_data(std::string(data));
        c.set_offset(offset);
        c.set_total_bytes(total);
        return writer->Write(c);
      });
  return ToGrpcStatus(sent);
}

}  // namespace cohort::server
