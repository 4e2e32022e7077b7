#include "worker/trainer/collective/deadline.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace cohort::trainer::collective {

bool PollUntil(absl::Time deadline, const std::function<bool()>& done,
               absl::Duration first_sleep, absl::Duration max_sleep) {
  absl::Duration sleep = first_sleep;
  for (;;) {
    if (done()) return true;
    absl::Time now = absl::Now();
    if (now >= deadline) return false;
    absl::SleepFor(std::min(sleep, deadline - now));
    sleep = std::min(sleep * 2, max_sleep);
  }
}

}  // namespace cohort::trainer::collective
