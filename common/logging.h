#pragma once

// Logging for the daemons: spdlog to stderr, one line per event, with the component
// name ("server", "agent") in every line. Two formats (`--log-format`):
//   text  "2026-12-03T08:23:02.123 I server: message"   (local time; the default)
//   json  one object per line: time, level, logger, message, and job, attempt, rank
//         for lines about a job (common/json_log_format.h)

#include <string>

#include <spdlog/fmt/fmt.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

enum class LogFormat { kText, kJson };

// "text" or "json"; INVALID_ARGUMENT naming --log-format otherwise.
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text);

// Sets the default spdlog logger. `level`: trace, debug, info, warn, error.
absl::Status InitLogging(absl::string_view component, absl::string_view level,
                         LogFormat format = LogFormat::kText);

// What a log line about a job carries in the JSON format. Empty / -1: not known.
struct JobLogFields {
  std::string job_id;
  int attempt = -1;
  int rank = -1;
};

// Lines logged on this thread while this object lives carry `fields` (JSON format; the
// text format leaves them to the message). Nests: the innermost wins, and the outer
// ones return when it ends. Create and destroy on the same thread.
class ScopedJobLogFields {
 public:
  explicit ScopedJobLogFields(JobLogFields fields);
  ~ScopedJobLogFields();
  ScopedJobLogFields(const ScopedJobLogFields&) = delete;
  ScopedJobLogFields& operator=(const ScopedJobLogFields&) = delete;

 private:
  JobLogFields fields_;
  const JobLogFields* previous_;
};

// The fields in force on this thread, or null.
const JobLogFields* CurrentJobLogFields();

}  // namespace cohort

// Debian's abseil has its own string_view (not std::string_view): teach fmt to print it,
// and Status, so log calls can pass them as they are.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(absl::string_view s, Context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};

template <>
struct fmt::formatter<absl::Status> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(const absl::Status& s, Context& ctx) const {
    std::string text = s.ToString();
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(text), ctx);
  }
};
