#pragma once

// Names users and agents choose (worker names, later job names): 1-63 letters, digits,
// '.', '-' and '_', starting with a letter or digit, so they are safe in file paths,
// logs and Kubernetes object names.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort {

// OK, or INVALID_ARGUMENT "<field>: '<name>' is not a valid ..." .
absl::Status CheckName(absl::string_view name, absl::string_view field);

}  // namespace cohort
