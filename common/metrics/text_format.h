#pragma once

// The pieces of Prometheus' text exposition format 0.0.4 that need care:
// https://prometheus.io/docs/instrumenting/exposition_formats/
// Thread-safe (pure functions).

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace cohort::metrics {

// A sample value as Go's strconv.FormatFloat(v, 'g', -1, 64) writes it (the shortest
// text that reads back as the same double), and "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);

// HELP text: backslash and newline escaped as \\ and \n.
std::string EscapeHelp(absl::string_view help);

// A label value: backslash, double quote and newline escaped as \\, \" and \n.
std::string EscapeLabelValue(absl::string_view value);

// `{a="x",b="y"}` for the names and values given (the same count), or "" for none.
std::string FormatLabels(const std::vector<std::string>& names,
                         const std::vector<std::string>& values);

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(absl::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved for Prometheus itself).
bool IsValidLabelName(absl::string_view name);

}  // namespace cohort::metrics
