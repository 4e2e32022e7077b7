#pragma once

// AssignmentLoop: reads one lease's StreamAssignments stream and acts on what comes:
// START launches the rank (RankSet::Start), STOP stops every rank of the attempt
// (rank.rank ignored; docs/job-protocol.md rule 1). An assignment without a known action is
// logged and skipped. The agent calls Stream() again, with its current lease, whenever
// a stream ends (docs/job-protocol.md rule 2).
//
// Thread safety: Stream() runs on one thread at a time; Cancel() may come from any.

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cohort/v1/worker_service.grpc.pb.h"
#include "worker/agent/rank_set.h"

namespace cohort::agent {

class AssignmentLoop {
 public:
  // Neither is owned; both outlive the loop.
  AssignmentLoop(v1::WorkerService::StubInterface* stub, RankSet* ranks)
      : stub_(stub), ranks_(ranks) {}

  // Blocks while the stream for `lease_id` is open. Returns why it ended: NOT_FOUND
  // (the coordinator forgot the lease: register again), UNAVAILABLE, CANCELLED after
  // Cancel(), or OK when the coordinator closed it.
  absl::Status Stream(const std::string& lease_id);
  // Ends the Stream() in progress, and any later one at once.
  void Cancel();

  // Acts on one assignment (what Stream() does for each message).
  static void Dispatch(const v1::Assignment& assignment, RankSet& ranks);

 private:
  v1::WorkerService::StubInterface* const stub_;
  RankSet* const ranks_;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace cohort::agent
