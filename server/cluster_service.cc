#include "server/cluster_service.h"

namespace cohort::server {

grpc::Status ClusterServiceImpl::ListWorkers(grpc::ServerContext*,
                                             const v1::ListWorkersRequest* request,
                                             v1::ListWorkersResponse* response) {
  std::vector<v1::WorkerState> states;
  for (int s : request->states()) states.push_back(static_cast<v1::WorkerState>(s));
  for (auto& w : registry_->List(states)) {
    if (manager_ != nullptr) w.set_busy_slots(manager_->BusySlots(w.name()));
    *response->add_workers() = std::move(w);
  }
  return grpc::Status::OK;
}

}  // namespace cohort::server
