#pragma once

// Durations as flags take them: "10s", "500ms", "2m", "1h30m" (Go-style, via absl).
// A bare number is refused: the unit must be explicit.

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace cohort {

// `what` names the flag or field in the error ("--lease-ttl").
absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view text, absl::string_view what);

}  // namespace cohort
