#include "client/call.h"

#include <cstdio>

#include "client/exit_codes.h"
#include "proto/channel.h"

namespace cohort::client {

std::unique_ptr<grpc::ClientContext> NewCallContext(const Connection& connection) {
  return ContextWithDeadline(connection.timeout);
}

int ReportCallError(const Connection& connection, const grpc::Status& status) {
  bool unreachable = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                     status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  if (unreachable) {
    std::fprintf(stderr, "cohort: error: cannot reach the coordinator at %s (%s)\n",
                 connection.coordinator.ToString().c_str(), status.error_message().c_str());
    return kExitUnreachable;
  }
  std::fprintf(stderr, "cohort: error: %s\n", status.error_message().c_str());
  return kExitFailed;
}

std::unique_ptr<v1::JobService::Stub> NewJobStub(const Connection& connection) {
  return v1::JobService::NewStub(CreateCoordinatorChannel(connection.coordinator, connection.security));
}

grpc::Status GetJob(const Connection& connection, v1::JobService::Stub& stub,
                    const std::string& job_id, v1::Job* job) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  return stub.GetJob(NewCallContext(connection).get(), request, job);
}

}  // namespace cohort::client
