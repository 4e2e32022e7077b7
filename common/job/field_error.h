#pragma once

// How job-spec errors are worded: "<field>: <problem> (line N)". The YAML parser
// records the line of every field it reads in a FieldLines, so that checks made later,
// on the typed JobSpec, still point at the line the user wrote. Internal to
// common/job; plain values.

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort::job {

// Field path ("fit.batch_size", "compile.metrics[1]") -> 1-based YAML line.
using FieldLines = std::map<std::string, int, std::less<>>;

// INVALID_ARGUMENT "<field>: <problem>", with " (line N)" when `lines` knows `field`.
absl::Status FieldError(const FieldLines& lines, absl::string_view field,
                        absl::string_view problem);

// Text that reads back as exactly `value`: "0.001", "0.0000001", "128", "5e-324".
std::string FormatNumber(double value);

}  // namespace cohort::job
