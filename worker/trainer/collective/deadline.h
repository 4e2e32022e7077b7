#pragma once

// Polling against a deadline, for the waits that have no blocking call with a timeout: a
// rendezvous file appearing, a CUDA event or an NCCL communicator finishing its work.

#include <functional>

#include "absl/time/time.h"

namespace cohort::trainer::collective {

// Calls `done` until it returns true or `deadline` passes; returns whether it returned
// true. `done` is called at least once, even when the deadline has passed already.
// Between calls it sleeps, starting at `first_sleep` and doubling up to `max_sleep`: a
// short wait costs little latency and a long one little CPU.
bool PollUntil(absl::Time deadline, const std::function<bool()>& done,
               absl::Duration first_sleep = absl::Microseconds(20),
               absl::Duration max_sleep = absl::Milliseconds(10));

}  // namespace cohort::trainer::collective
