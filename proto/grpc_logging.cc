#include "proto/grpc_logging.h"

#include <grpc/support/log.h>
#include <spdlog/spdlog.h>

namespace cohort {
namespace {

void ToSpdlog(gpr_log_func_args* args) {
  spdlog::level::level_enum level = spdlog::level::info;
  switch (args->severity) {
    case GPR_LOG_SEVERITY_DEBUG:
      level = spdlog::level::debug;
      break;
    case GPR_LOG_SEVERITY_INFO:
      level = spdlog::level::info;
      break;
    case GPR_LOG_SEVERITY_ERROR:
      level = spdlog::level::err;
      break;
  }
  spdlog::log(level, "grpc: {} ({}:{})", args->message != nullptr ? args->message : "",
              args->file != nullptr ? args->file : "?", args->line);
}

}  // namespace

void RouteGrpcLogsToSpdlog() { gpr_set_log_function(ToSpdlog); }

}  // namespace cohort
