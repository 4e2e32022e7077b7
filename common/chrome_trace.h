#pragma once

// MergeChromeTraces: Chrome traces (the JSON "traceEvents" format; one per rank,
// worker/trainer/step_trace.h) as one, for one timeline with a track per rank: the
// events of every input, in input order, under one "traceEvents". Inputs are named
// (a path) only for errors: INVALID_ARGUMENT naming the input that is not JSON or has
// no "traceEvents" array. An input may also be a bare array of events (the format's
// other form). Thread-safe (a pure function).

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort {

// `traces`: (name, JSON text) pairs.
absl::StatusOr<std::string> MergeChromeTraces(
    const std::vector<std::pair<std::string, std::string>>& traces);

}  // namespace cohort
