#pragma once

// A loopback TCP port that was free a moment ago (bound to port 0, then closed).

namespace cohort::testing {

int FreePort();

}  // namespace cohort::testing
