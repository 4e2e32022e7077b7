#include "common/clock.h"

#include <catch2/catch.hpp>

namespace cohort {
namespace {

TEST_CASE("ManualClock moves only when advanced", "[common]") {
  ManualClock clock;
  absl::Time start = clock.Now();
  CHECK(clock.Now() == start);
  clock.Advance(absl::Seconds(3));
  CHECK(clock.Now() - start == absl::Seconds(3));
}

TEST_CASE("SystemClock follows real time", "[common]") {
  absl::Time a = SystemClock().Now();
  CHECK(absl::AbsDuration(a - absl::Now()) < absl::Seconds(5));
}

}  // namespace
}  // namespace cohort
