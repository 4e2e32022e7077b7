#pragma once

// The gRPC face of ClusterService (proto/cohort/v1/cluster_service.proto) for clients.

#include "cohort/v1/cluster_service.grpc.pb.h"
#include "server/auth.h"
#include "server/job_manager.h"
#include "server/worker_registry.h"

namespace cohort::server {

class ClusterServiceImpl final : public v1::ClusterService::Service {
 public:
  // `authorizer`, `registry` (and `manager`, which fills WorkerInfo.busy_slots, when
  // given) must outlive the service. Callers: server/auth.h (user and admin).
  ClusterServiceImpl(const Authorizer* authorizer, WorkerRegistry* registry,
                     JobManager* manager = nullptr)
      : authorizer_(authorizer), registry_(registry), manager_(manager) {}

  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;

 private:
  const Authorizer* const authorizer_;
  WorkerRegistry* const registry_;
  JobManager* const manager_;
};

}  // namespace cohort::server
