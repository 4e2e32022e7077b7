#pragma once

// The gRPC face of ClusterService (proto/cohort/v1/cluster_service.proto) for clients.

#include "cohort/v1/cluster_service.grpc.pb.h"
#include "server/worker_registry.h"

namespace cohort::server {

class ClusterServiceImpl final : public v1::ClusterService::Service {
 public:
  // `registry` must outlive the service.
  explicit ClusterServiceImpl(WorkerRegistry* registry) : registry_(registry) {}

  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;

 private:
  WorkerRegistry* const registry_;
};

}  // namespace cohort::server
