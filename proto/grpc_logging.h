#pragma once

// RouteGrpcLogsToSpdlog: gRPC's own log lines (gpr_log: connection errors, warnings)
// go through the default spdlog logger, in the daemon's --log-format, instead of
// straight to stderr in gRPC's format; so with `--log-format json` every line a daemon
// writes is a JSON object. gRPC's ERROR becomes error, INFO info, DEBUG debug (spdlog's
// level still filters them). Call once, after InitLogging (common/logging.h), before
// gRPC starts.

namespace cohort {

void RouteGrpcLogsToSpdlog();

}  // namespace cohort
