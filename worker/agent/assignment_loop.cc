#include "worker/agent/assignment_loop.h"

#include <grpcpp/client_context.h>
#include <spdlog/spdlog.h>

#include "common/logging.h"

#include "proto/grpc_status.h"

namespace cohort::agent {

void AssignmentLoop::Dispatch(const v1::Assignment& assignment, RankSet& ranks) {
  const v1::RankRef& r = assignment.rank();
  switch (assignment.action()) {
    case v1::ASSIGNMENT_ACTION_START:
      spdlog::info("START job {} attempt {} rank {}/{} on slot {}", r.job_id(), r.attempt(),
                   r.rank(), assignment.world_size(), assignment.slot());
      ranks.Start(assignment);
      return;
    case v1::ASSIGNMENT_ACTION_STOP: {
      int stopped = ranks.StopAttempt(r.job_id(), r.attempt());
      spdlog::info("STOP job {} attempt {}: {} rank(s) here", r.job_id(), r.attempt(), stopped);
      return;
    }
    default:
      spdlog::warn("assignment with unknown action {} for job {} ignored",
                   static_cast<int>(assignment.action()), r.job_id());
  }
}

absl::Status AssignmentLoop::Stream(const std::string& lease_id) {
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return absl::CancelledError("agent stopping");
    context_ = &context;
  }
  v1::StreamAssignmentsRequest request;
  request.set_lease_id(lease_id);
  std::unique_ptr<grpc::ClientReaderInterface<v1::Assignment>> reader =
      stub_->StreamAssignments(&context, request);
  v1::Assignment assignment;
  while (reader->Read(&assignment)) Dispatch(assignment, *ranks_);
  absl::Status status = FromGrpcStatus(reader->Finish());
  absl::MutexLock lock(&mu_);
  context_ = nullptr;
  if (cancelled_) return absl::CancelledError("agent stopping");
  return status;
}

void AssignmentLoop::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (context_ != nullptr) context_->TryCancel();
}

}  // namespace cohort::agent
