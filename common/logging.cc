#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/json_log_format.h"

namespace cohort {

namespace {

thread_local const JobLogFields* current_fields = nullptr;

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text) {
  if (text == "text") return LogFormat::kText;
  if (text == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--log-format: '", text, "' is not one of text, json"));
}

ScopedJobLogFields::ScopedJobLogFields(JobLogFields fields)
    : fields_(std::move(fields)), previous_(current_fields) {
  current_fields = &fields_;
}

ScopedJobLogFields::~ScopedJobLogFields() { current_fields = previous_; }

const JobLogFields* CurrentJobLogFields() { return current_fields; }

absl::Status InitLogging(absl::string_view component, absl::string_view level, LogFormat format) {
  spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-level: '", level, "' is not one of trace, debug, info, warn, error, off"));
  }
  auto logger = spdlog::stderr_logger_mt(std::string(component));
  if (format == LogFormat::kJson) {
    logger->set_formatter(MakeJsonLogFormatter());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %n: %v");
  }
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return absl::OkStatus();
}

}  // namespace cohort
