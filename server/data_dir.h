#pragma once

// The coordinator's data directory: created when missing (with its parents), and
// checked to be a writable directory before anything is written into it.

#include <string>

#include "absl/status/status.h"

namespace cohort::server {

absl::Status PrepareDataDir(const std::string& dir);

}  // namespace cohort::server
