#include "server/worker_service.h"

#include "proto/grpc_status.h"

namespace cohort::server {
namespace {

// Copies a StatusOr's value into a gRPC response, or maps its error.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = std::move(*result);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status WorkerServiceImpl::Register(grpc::ServerContext*, const v1::RegisterRequest* request,
                                         v1::RegisterResponse* response) {
  return Reply(registry_->Register(*request), response);
}

grpc::Status WorkerServiceImpl::Heartbeat(grpc::ServerContext*,
                                          const v1::HeartbeatRequest* request,
                                          v1::HeartbeatResponse* response) {
  return Reply(registry_->Heartbeat(*request), response);
}

grpc::Status WorkerServiceImpl::Deregister(grpc::ServerContext*,
                                           const v1::DeregisterRequest* request,
                                           v1::DeregisterResponse*) {
  return ToGrpcStatus(registry_->Deregister(*request));
}

}  // namespace cohort::server
