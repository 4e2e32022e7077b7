#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace cohort {

absl::Status InitLogging(absl::string_view component, absl::string_view level) {
  spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-level: '", level, "' is not one of trace, debug, info, warn, error, off"));
  }
  auto logger = spdlog::stderr_logger_mt(std::string(component));
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %n: %v");
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return absl::OkStatus();
}

}  // namespace cohort
