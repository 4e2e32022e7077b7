#include "common/clock.h"

namespace cohort {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

Clock& SystemClock() {
  static RealClock* clock = new RealClock();
  return *clock;
}

absl::Time ManualClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void ManualClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  now_ += d;
}

}  // namespace cohort
