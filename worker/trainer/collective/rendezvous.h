#pragma once

// The first step of every backend's setup, shared so both report a missing rank alike.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "worker/trainer/collective/store.h"

namespace cohort::trainer::collective {

// INVALID_ARGUMENT unless size >= 1 and 0 <= rank < size; `what` names the backend.
absl::Status ValidateRankAndSize(absl::string_view what, int rank, int size);

// Publishes "joined/<rank>" and waits until every rank has. A rank that never starts is
// named: DEADLINE_EXCEEDED "rendezvous timed out after 30s waiting for ranks 1, 2 to join"
// — where a backend's own connection step could only say that it timed out. Store errors
// pass through.
absl::Status JoinRendezvous(Store& store, int rank, int size, absl::Duration timeout);

}  // namespace cohort::trainer::collective
