#pragma once

// `cohort trace JOB -o FILE`: the step timelines of a job submitted with --trace merged
// into one Chrome trace (the JSON "traceEvents" format chrome://tracing and
// ui.perfetto.dev load). Each rank's agent uploads the rank's timeline as the artifact
// "trace/rank-<r>.json" when the rank ends, whatever its outcome
// (worker/agent/rank_runner.h); this command downloads every one and merges them
// (common/chrome_trace.h): one process per rank named "rank R", its spans on a
// "compute" and an "all-reduce" track, times in microseconds since the Unix epoch so
// ranks on different hosts line up.
//
// FILE appears complete or not at all. Exit codes (client/exit_codes.h): 0 written (a
// rank without a trace, e.g. one lost with its worker, is named on stderr); 1 the job
// was not traced, no rank has uploaded its trace yet, or a trace is not Chrome trace
// JSON; 2 bad arguments; 4 the coordinator could not be reached.

#include <string>

#include "client/call.h"

namespace cohort::client {

struct TraceOptions {
  std::string job_id;
  std::string out_path = "trace.json";
};

int RunTraceCommand(const Connection& connection, const TraceOptions& options);

}  // namespace cohort::client
