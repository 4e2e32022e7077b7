#pragma once

// The `--log-format json` form of the daemons' log lines: one JSON object per line,
//
//   {"time":"2026-12-03T08:23:02.123Z","level":"info","logger":"server",
//    "message":"job-7 queued","job":"job-7","attempt":2,"rank":0}
//
// time is UTC with milliseconds; level is spdlog's name (trace, debug, info, warning,
// error, critical); job, attempt and rank appear on lines logged while a
// ScopedJobLogFields is alive on the logging thread (common/logging.h). Strings are
// escaped as RFC 8259 requires (quote, backslash, control characters), and bytes that
// are not valid UTF-8 become U+FFFD, so every line parses whatever was logged.

#include <memory>
#include <string>

#include <spdlog/formatter.h>

#include "absl/strings/string_view.h"

namespace cohort {

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(absl::string_view text);

// A formatter for spdlog sinks (logger->set_formatter). Thread-compatible, as spdlog
// formatters are: each sink holds its own clone.
std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter();

}  // namespace cohort
