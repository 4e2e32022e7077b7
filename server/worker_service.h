#pragma once

// The gRPC face of WorkerService (proto/cohort/v1/worker_service.proto) for agents and
// the trainers they start. Leases are served by the WorkerRegistry; assignments,
// events, exits and artifact uploads by the JobManager (its header states the rules);
// the rendezvous by Rendezvous; data fetches by the ArtifactStore.
//
// Heartbeat also hands the agent's `running` list to the JobManager (protocol rule 3).
// UploadArtifact takes a client stream whose first chunk carries the header; only rank
// 0 of the job's live attempt may upload (FAILED_PRECONDITION otherwise), and the
// artifact is recorded on the job once its size and SHA-256 check out.

#include "cohort/v1/worker_service.grpc.pb.h"
#include "server/artifact_store.h"
#include "server/auth.h"
#include "server/job_manager.h"
#include "server/rendezvous.h"
#include "server/worker_registry.h"

namespace cohort::server {

class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  // Everything passed must outlive the service. Without `manager` (leases only), the
  // job calls answer UNIMPLEMENTED. Every call is authorized first (server/auth.h: the
  // worker role only).
  WorkerServiceImpl(const Authorizer* authorizer, WorkerRegistry* registry,
                    JobManager* manager = nullptr, Rendezvous* rendezvous = nullptr,
                    ArtifactStore* artifacts = nullptr)
      : authorizer_(authorizer), registry_(registry), manager_(manager), rendezvous_(rendezvous),
        artifacts_(artifacts) {}

  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status Deregister(grpc::ServerContext* context, const v1::DeregisterRequest* request,
                          v1::DeregisterResponse* response) override;
  grpc::Status StreamAssignments(grpc::ServerContext* context,
                                 const v1::StreamAssignmentsRequest* request,
                                 grpc::ServerWriter<v1::Assignment>* writer) override;
  grpc::Status RendezvousSet(grpc::ServerContext* context, const v1::RendezvousSetRequest* request,
                             v1::RendezvousSetResponse* response) override;
  grpc::Status RendezvousGet(grpc::ServerContext* context, const v1::RendezvousGetRequest* request,
                             v1::RendezvousGetResponse* response) override;
  grpc::Status ReportEvents(grpc::ServerContext* context, grpc::ServerReader<v1::RankEvent>* reader,
                            v1::ReportEventsResponse* response) override;
  grpc::Status ReportExit(grpc::ServerContext* context, const v1::ReportExitRequest* request,
                          v1::ReportExitResponse* response) override;
  grpc::Status UploadArtifact(grpc::ServerContext* context,
                              grpc::ServerReader<v1::ArtifactChunk>* reader,
                              v1::ArtifactInfo* response) override;
  grpc::Status FetchData(grpc::ServerContext* context, const v1::FetchDataRequest* request,
                         grpc::ServerWriter<v1::DataChunk>* writer) override;

 private:
  const Authorizer* const authorizer_;
  WorkerRegistry* const registry_;
  JobManager* const manager_;
  Rendezvous* const rendezvous_;
  ArtifactStore* const artifacts_;
};

}  // namespace cohort::server
