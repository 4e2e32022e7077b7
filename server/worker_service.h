#pragma once

// The gRPC face of WorkerService (proto/cohort/v1/worker_service.proto) for agents.
// Leases are served by the WorkerRegistry; the job parts (assignments, rendezvous,
// events) come with the job server.

#include "cohort/v1/worker_service.grpc.pb.h"
#include "server/worker_registry.h"

namespace cohort::server {

class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  // `registry` must outlive the service.
  explicit WorkerServiceImpl(WorkerRegistry* registry) : registry_(registry) {}

  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status Deregister(grpc::ServerContext* context, const v1::DeregisterRequest* request,
                          v1::DeregisterResponse* response) override;

 private:
  WorkerRegistry* const registry_;
};

}  // namespace cohort::server
