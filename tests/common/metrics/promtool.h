#pragma once

// `promtool check metrics`, Prometheus' own linter of the text format (Debian package
// `prometheus`), as the judge of what the metrics endpoints serve.

#include <string>

namespace cohort::testing {

// The path of promtool, or "" when it is not installed (tests then skip, saying so).
std::string PromtoolPath();

// Runs `promtool check metrics` on `text`; returns "" when it passes, else what it said.
std::string PromtoolProblems(const std::string& text);

}  // namespace cohort::testing
