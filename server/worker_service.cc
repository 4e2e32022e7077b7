#include "server/worker_service.h"

#include "absl/strings/str_cat.h"
#include "common/transfer/file_chunks.h"
#include "proto/grpc_status.h"
#include "proto/time_convert.h"
#include "server/receive_chunks.h"

namespace cohort::server {
namespace {

// Copies a StatusOr's value into a gRPC response, or maps its error.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = std::move(*result);
  return grpc::Status::OK;
}

grpc::Status NoJobs() {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this coordinator runs no jobs");
}

}  // namespace

grpc::Status WorkerServiceImpl::Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                                         v1::RegisterResponse* response) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kWorkers);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return Reply(registry_->Register(*request), response);
}

grpc::Status WorkerServiceImpl::Heartbeat(grpc::ServerContext* context,
                                          const v1::HeartbeatRequest* request,
                                          v1::HeartbeatResponse* response) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kWorkers);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  grpc::Status status = Reply(registry_->Heartbeat(*request), response);
  if (!status.ok() || manager_ == nullptr) return status;
  absl::StatusOr<std::string> worker = registry_->LeaseOwner(request->lease_id());
  if (worker.ok()) {
    manager_->OnHeartbeat(*worker, {request->running().begin(), request->running().end()});
  }
  return status;
}

grpc::Status WorkerServiceImpl::Deregister(grpc::ServerContext* context,
                                           const v1::DeregisterRequest* request,
                                           v1::DeregisterResponse*) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kWorkers);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return ToGrpcStatus(registry_->Deregister(*request));
}

grpc::Status WorkerServiceImpl::StreamAssignments(grpc::ServerContext* context,
                                                  const v1::StreamAssignmentsRequest* request,
                                                  grpc::ServerWriter<v1::Assignment>* writer) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kWorkers);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (manager_ == nullptr) return NoJobs();
  return ToGrpcStatus(manager_->ServeAssignments(
      request->lease_id(), [writer](const v1::Assignment& a) { return writer->Write(a); },
      [context] { return context->IsCancelled(); }));
}

grpc::Status WorkerServiceImpl::RendezvousSet(grpc::ServerContext* context,
                                              const v1::RendezvousSetRequest* request,
                                              v1::RendezvousSetResponse*) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kWorkers);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (rendezvous_ == nullptr) return NoJobs();
  return ToGrpcStatus(rendezvous_->Set(request->namespace_(), request->key(), request->value()));
}

grpc::Status WorkerServiceImpl::RendezvousGet(grpc::ServerContext* context,
                                              const v1::RendezvousGetRequest* request,
                                              v1::RendezvousGetResponse* response) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kWorkers);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (rendezvous_ == nullptr) return NoJobs();
  absl::Duration timeout =
      request->has_timeout() ? FromProto(request->timeout()) : absl::ZeroDuration();
  absl::StatusOr<std::vector<std::string>> values =
      rendezvous_->Get(request->namespace_(), {request->keys().begin(), request->keys().end()},
                       timeout, [context] { return context->IsCancelled(); });
  if (!values.ok()) return ToGrpcStatus(values.status());
  for (std::string& v : *values) response->add_values(std::move(v));
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::ReportEvents(grpc::ServerContext* context,
                                             grpc::ServerReader<v1::RankEvent>* reader,
                                             v1::ReportEventsResponse*) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kWorkers);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (manager_ == nullptr) return NoJobs();
  v1::RankEvent event;
  while (reader->Read(&event)) manager_->OnEvent(event);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::ReportExit(grpc::ServerContext* context,
                                           const v1::ReportExitRequest* request,
                                           v1::ReportExitResponse*) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kWorkers);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (manager_ == nullptr) return NoJobs();
  return ToGrpcStatus(manager_->OnExit(*request));
}

grpc::Status WorkerServiceImpl::UploadArtifact(grpc::ServerContext* context,
                                               grpc::ServerReader<v1::ArtifactChunk>* reader,
                                               v1::ArtifactInfo* response) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kWorkers);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (manager_ == nullptr || artifacts_ == nullptr) return NoJobs();
  v1::ArtifactChunk chunk;
  if (!reader->Read(&chunk) || !chunk.has_header()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "upload: the first chunk must carry the header");
  }
  const v1::ArtifactHeader h = chunk.header();
  if (absl::Status s = manager_->CheckUploader(h.rank(), h.name()); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<v1::ArtifactInfo> info = ReceiveChunks(
      artifacts_->StartJobArtifact(h.rank().job_id(), h.name(),
                                   h.size_bytes() > 0 ? h.size_bytes() : -1, h.sha256()),
      chunk, reader,
      // Checked again, moved into place and recorded under the manager's lock: a rank
      // that lost its right to upload meanwhile (its attempt ended and another began)
      // replaces no file.
      [&](const v1::ArtifactInfo& received, const ArtifactStore::Receiver::Publish& publish) {
        return manager_->AddArtifact(h.rank(), received, publish);
      });
  if (!info.ok()) return ToGrpcStatus(info.status());
  *response = *std::move(info);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::FetchData(grpc::ServerContext* context, const v1::FetchDataRequest* request,
                                          grpc::ServerWriter<v1::DataChunk>* writer) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kWorkers);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (artifacts_ == nullptr) return NoJobs();
  absl::StatusOr<std::string> path = artifacts_->UploadPath(request->artifact_id());
  if (!path.ok()) return ToGrpcStatus(path.status());
  return ToGrpcStatus(SendFileChunks(
      *path, request->offset(), [&](absl::string_view data, int64_t offset, int64_t total) {
        v1::DataChunk c;
        c.set_data(std::string(data));
        c.set_offset(offset);
        c.set_total_bytes(total);
        return writer->Write(c);
      }));
}

}  // namespace cohort::server
