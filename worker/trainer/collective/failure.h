#pragma once

// Failures, shared by the backends so a user reads one vocabulary whichever ran: the
// error constructors behind the messages collective.h promises, the latch that makes a
// collective unusable after its first error, and a Work that has already completed.

#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/trainer/collective/collective.h"

namespace cohort::trainer::collective {

// `op` names the operation ("all-reduce"); `peer` the rank it concerns, when known;
// `detail` is the backend's own words, appended in brackets.
//
// DEADLINE_EXCEEDED "all-reduce timed out after 30s waiting for rank 1 [detail]"
absl::Status PeerTimedOut(absl::string_view op, std::optional<int> peer, absl::Duration timeout,
                          absl::string_view detail);
// UNAVAILABLE "all-reduce with rank 1 failed: connection closed (peer died?) [detail]"
absl::Status PeerLost(absl::string_view op, std::optional<int> peer, absl::string_view detail);

// Remembers a collective's first failure. Thread-safe.
class FailureLatch {
 public:
  // OK until a failure was recorded; then FAILED_PRECONDITION quoting that failure.
  absl::Status Check() const;
  // Records `status` when it is the first failure; returns it unchanged.
  absl::Status Record(absl::Status status);

 private:
  mutable absl::Mutex mu_;
  absl::Status first_ ABSL_GUARDED_BY(mu_);
};

// A Work whose operation has already completed with `status`.
std::unique_ptr<Work> CompletedWork(absl::Status status);

}  // namespace cohort::trainer::collective
