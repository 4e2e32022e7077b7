#pragma once

// `cohort status JOB`, `cohort list` and `cohort cancel JOB`: one unary call each,
// printed with client/job_format.h. Each returns the process exit code.

#include <optional>
#include <string>
#include <vector>

#include "client/call.h"
#include "client/workers_command.h"
#include "cohort/v1/types.pb.h"

namespace cohort::client {

int RunStatusCommand(const Connection& connection, const std::string& job_id, OutputFormat format);

// `states` empty: every job.
int RunListCommand(const Connection& connection, const std::vector<v1::JobState>& states,
                   OutputFormat format);

int RunCancelCommand(const Connection& connection, const std::string& job_id,
                     const std::string& reason, OutputFormat format);

}  // namespace cohort::client
