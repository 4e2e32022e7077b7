#include "common/duration.h"

#include "absl/strings/str_cat.h"

namespace cohort {

absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view text, absl::string_view what) {
  absl::Duration d;
  // absl accepts a bare "0"; a unit is required here.
  if (text.find_first_not_of("0123456789.") == absl::string_view::npos || !absl::ParseDuration(text, &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", text, "' is not a duration (use a unit: 500ms, 10s, 2m)"));
  }
  if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", text, "' must be positive and finite"));
  }
  return d;
}

}  // namespace cohort
