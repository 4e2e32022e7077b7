#pragma once

// `cohort workers`: lists the workers the coordinator knows, as a table or as JSON.

#include <string>

#include "client/call.h"

namespace cohort::client {

enum class OutputFormat { kTable, kJson };

// Returns the process exit code.
int RunWorkersCommand(const Connection& connection, OutputFormat format);

}  // namespace cohort::client
