#pragma once

// Time, injected where a test must control it (leases, timeouts). Production code uses
// SystemClock(); tests use ManualClock and advance it by hand. Both are thread-safe.

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// The process-wide real clock; never null, never destroyed.
Clock& SystemClock();

class ManualClock final : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::UnixEpoch() + absl::Hours(24 * 365 * 50))
      : now_(start) {}
  absl::Time Now() const override;
  void Advance(absl::Duration d);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort
