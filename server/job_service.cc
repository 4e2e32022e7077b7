#include "server/job_service.h"

#include <spdlog/spdlog.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/transfer/file_chunks.h"
#include "proto/grpc_status.h"
#include "server/receive_chunks.h"

namespace cohort::server {
namespace {

constexpr int32_t kWatchBatch = 500;

std::string Mib(int64_t bytes) { return absl::StrFormat("%.1f MiB", bytes / 1048576.0); }

bool EndsJob(const v1::JobEvent& e) {
  return e.has_state_change() && JobStore::IsFinal(e.state_change().to());
}

}  // namespace

absl::StatusOr<v1::Job> JobServiceImpl::VisibleJob(const Caller& caller, const std::string& id) {
  absl::StatusOr<v1::Job> job = store_->Get(id);
  if (!job.ok()) return job.status();
  if (absl::Status s = CheckJobAccess(caller, *job); !s.ok()) return s;
  return job;
}

absl::Status JobServiceImpl::QuotaError(const std::string& owner, int64_t used, int64_t bytes) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "upload refused: '", owner, "' has uploaded ", Mib(used), " and this upload is ",
      Mib(bytes), ", over the limit of ", Mib(options_.max_upload_bytes_per_user),
      " per user (--max-upload-bytes-per-user)"));
}

absl::Status JobServiceImpl::CheckUploadQuota(const std::string& owner, int64_t bytes) {
  if (options_.max_upload_bytes_per_user <= 0) return absl::OkStatus();
  absl::StatusOr<int64_t> used = uploads_->BytesOf(owner);
  if (!used.ok()) return used.status();
  if (*used + bytes <= options_.max_upload_bytes_per_user) return absl::OkStatus();
  return QuotaError(owner, *used, bytes);
}

absl::Status JobServiceImpl::RecordUpload(const std::string& owner, const std::string& id,
                                          int64_t bytes) {
  absl::StatusOr<bool> recorded =
      uploads_->RecordWithin(id, owner, bytes, options_.max_upload_bytes_per_user);
  if (!recorded.ok()) return recorded.status();
  if (*recorded) return absl::OkStatus();
  absl::StatusOr<int64_t> used = uploads_->BytesOf(owner);
  if (!used.ok()) return used.status();
  return QuotaError(owner, *used, bytes);
}

absl::Status JobServiceImpl::CheckArtifactsOwned(const Caller& caller, const v1::JobSpec& spec) {
  if (caller.role == Role::kAdmin) return absl::OkStatus();
  std::vector<std::pair<std::string, std::string>> named;  // field, artifact id
  if (spec.has_model_artifact_id()) named.emplace_back("model_artifact_id", spec.model_artifact_id());
  const v1::DataSpec& d = spec.data();
  for (const auto& [field, ref] : {std::pair<const char*, const v1::ArrayRef*>{"data.x", &d.x()},
                                   {"data.y", &d.y()},
                                   {"data.validation_x", &d.validation_x()},
                                   {"data.validation_y", &d.validation_y()}}) {
    if (ref->has_artifact_id()) named.emplace_back(field, ref->artifact_id());
  }
  for (const auto& [field, id] : named) {
    absl::StatusOr<bool> owns = uploads_->Owns(id, caller.identity);
    if (!owns.ok()) return owns.status();
    if (!*owns) {
      return absl::PermissionDeniedError(absl::StrCat(
          field, ": artifact '", id, "' was not uploaded by '", caller.identity,
          "'; a job may use only its owner's uploads (upload the file yourself)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> JobServiceImpl::Submit(const v1::SubmitJobRequest& request,
                                               const Caller& caller) {
  const std::string& owner = caller.identity;
  absl::StatusOr<ValidatedJob> valid = validator_->Validate(request.spec());
  if (!valid.ok()) return valid.status();
  if (absl::Status s = CheckArtifactsOwned(caller, request.spec()); !s.ok()) return s;
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
  if (options_.max_queued_jobs_per_user > 0) {
    absl::StatusOr<int64_t> mine = store_->CountActive(owner);
    if (!mine.ok()) return mine.status();
    if (*mine >= options_.max_queued_jobs_per_user) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "'", owner, "' has ", *mine, " jobs queued or running, the limit per user "
          "(--max-queued-jobs-per-user ", options_.max_queued_jobs_per_user,
          "); submit again when one has ended, or cancel one"));
    }
  }
  if (!valid->inline_model.empty()) {
    const int64_t size = static_cast<int64_t>(valid->inline_model.size());
    if (absl::Status s = CheckUploadQuota(owner, size); !s.ok()) return s;
    absl::StatusOr<std::string> id = artifacts_->PutUpload(valid->inline_extension, valid->inline_model);
    if (!id.ok()) return id.status();
    if (absl::Status s = RecordUpload(owner, *id, size); !s.ok()) return s;
    valid->stored.set_model_artifact_id(*id);
  }
  absl::StatusOr<v1::Job> job = store_->Insert(valid->stored, request.idempotency_key(), owner);
  if (!job.ok()) return job.status();
  spdlog::info("job {} submitted by {}", job->id(), owner);
  manager_->NotifyEvents(job->id());
  manager_->Wake();
  return job;
}

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* context,
                                       const v1::SubmitJobRequest* request,
                                       v1::SubmitJobResponse* response) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kJobs);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::Job> job = Submit(*request, *caller);
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                                    v1::Job* response) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kJobs);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::Job> job = VisibleJob(*caller, request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                                      v1::ListJobsResponse* response) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kJobs);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  std::vector<v1::JobState> states;
  for (int s : request->states()) states.push_back(static_cast<v1::JobState>(s));
  absl::StatusOr<v1::ListJobsResponse> list =
      store_->List(states, request->page_size(), request->page_token(),
                   caller->role == Role::kAdmin ? "" : caller->identity);
  if (!list.ok()) return ToGrpcStatus(list.status());
  *response = *std::move(list);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* context,
                                       const v1::CancelJobRequest* request, v1::Job* response) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kJobs);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (absl::StatusOr<v1::Job> visible = VisibleJob(*caller, request->job_id()); !visible.ok()) {
    return ToGrpcStatus(visible.status());
  }
  std::string reason = request->reason().empty()
                           ? absl::StrCat("cancelled by ", caller->identity)
                           : request->reason();
  absl::StatusOr<v1::Job> job = manager_->Cancel(request->job_id(), reason);
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* context,
                                      const v1::WatchJobRequest* request,
                                      grpc::ServerWriter<v1::JobEvent>* writer) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kJobs);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (absl::StatusOr<v1::Job> visible = VisibleJob(*caller, request->job_id()); !visible.ok()) {
    return ToGrpcStatus(visible.status());
  }
  if (watches_.fetch_add(1) >= options_.max_watches) {
    watches_.fetch_sub(1);
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("too many WatchJob streams are open (--max-watches ",
                                     options_.max_watches, "); watch again later"));
  }
  absl::Cleanup close = [this] { watches_.fetch_sub(1); };
  int64_t after = std::max<int64_t>(0, request->after_sequence());
  // Subscribed before the first read: an event stored after a read wakes the wait.
  WatchHub::Subscription watch(&manager_->watch_hub(), request->job_id());
  bool checked_final = false;
  while (true) {
    uint64_t generation = watch.Generation();
    absl::StatusOr<std::vector<v1::JobEvent>> events =
        store_->Events(request->job_id(), after, kWatchBatch);
    if (!events.ok()) return ToGrpcStatus(events.status());
    for (const v1::JobEvent& e : *events) {
      if (!writer->Write(e)) return grpc::Status(grpc::StatusCode::CANCELLED, "watcher went away");
      after = e.sequence();
      if (EndsJob(e)) return grpc::Status::OK;
    }
    if (static_cast<int32_t>(events->size()) == kWatchBatch) continue;
    if (!checked_final) {
      // Nothing more will come when the final event was before after_sequence. Checked
      // once: a job that ends later has its final event after `after`, which ends the loop.
      absl::StatusOr<v1::Job> job = store_->Get(request->job_id());
      if (!job.ok()) return ToGrpcStatus(job.status());
      if (JobStore::IsFinal(job->state()) && job->last_sequence() <= after) return grpc::Status::OK;
      checked_final = true;
    }
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "watcher went away");
    if (manager_->watch_hub().closed()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
    }
    watch.Wait(generation, absl::Milliseconds(500));
  }
}

grpc::Status JobServiceImpl::UploadData(grpc::ServerContext* context,
                                        grpc::ServerReader<v1::UploadChunk>* reader,
                                        v1::UploadDataResponse* response) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kJobs);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  v1::UploadChunk chunk;
  if (!reader->Read(&chunk)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "upload: no chunks were sent");
  }
  if (!chunk.has_header()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "upload: the first chunk must carry the header");
  }
  const v1::UploadHeader& h = chunk.header();
  const std::string& owner = caller->identity;
  // Bytes the caller already has (named by the declared SHA-256) are not counted again.
  bool known = false;
  if (absl::StatusOr<std::string> ext = ArtifactStore::UploadExtension(h.file_name(), "header.file_name");
      ext.ok() && !h.sha256().empty()) {
    absl::StatusOr<bool> owns = uploads_->Owns(absl::StrCat(h.sha256(), ".", *ext), owner);
    if (!owns.ok()) return ToGrpcStatus(owns.status());
    known = *owns;
  }
  if (!known) {
    if (absl::Status s = CheckUploadQuota(owner, std::max<int64_t>(h.size_bytes(), 0)); !s.ok()) {
      return ToGrpcStatus(s);
    }
  }
  absl::StatusOr<v1::ArtifactInfo> info = ReceiveChunks(
      artifacts_->StartUpload(h.file_name(), h.size_bytes() > 0 ? h.size_bytes() : -1, h.sha256()),
      chunk, reader);
  if (!info.ok()) return ToGrpcStatus(info.status());
  // The same bytes uploaded again by their owner add nothing; new ones are checked
  // against the quota with their real size (the declared one may have been missing),
  // and recorded in the same statement (two uploads ending together cannot both pass).
  if (absl::Status s = RecordUpload(owner, info->name(), info->size_bytes()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  response->set_artifact_id(info->name());
  response->set_size_bytes(info->size_bytes());
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::DownloadArtifact(grpc::ServerContext* context,
                                              const v1::DownloadArtifactRequest* request,
                                              grpc::ServerWriter<v1::DataChunk>* writer) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kJobs);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::Job> job = VisibleJob(*caller, request->job_id());
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
