#include "server/cluster_service.h"

#include "proto/grpc_status.h"

namespace cohort::server {

grpc::Status ClusterServiceImpl::ListWorkers(grpc::ServerContext* context,
                                             const v1::ListWorkersRequest* request,
                                             v1::ListWorkersResponse* response) {
  absl::StatusOr<Caller> caller = authorizer_->Authorize(*context, Api::kCluster);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  std::vector<v1::WorkerState> states;
  for (int s : request->states()) states.push_back(static_cast<v1::WorkerState>(s));
  for (auto& w : registry_->List(states)) {
    if (manager_ != nullptr) w.set_busy_slots(manager_->BusySlots(w.name()));
    *response->add_workers() = std::move(w);
  }
  return grpc::Status::OK;
}

}  // namespace cohort::server
