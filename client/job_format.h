#pragma once

// How jobs read in the terminal: state names, placements, one-line summaries, the
// `cohort status` page and the `cohort list` table. Pure functions of the proto
// messages; `now` is passed in so output is reproducible in tests.

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cohort/v1/types.pb.h"

namespace cohort::client {

// "QUEUED", "RUNNING", ... ("UNKNOWN" for values this client does not know).
std::string JobStateName(v1::JobState state);
// Parses a state as users type it: "running", "RUNNING", "JOB_STATE_RUNNING".
std::optional<v1::JobState> JobStateFromName(const std::string& name);
// True for SUCCEEDED, FAILED and CANCELLED.
bool IsFinal(v1::JobState state);
// The exit code a finished job gives `cohort watch` (client/exit_codes.h): 0
// SUCCEEDED, 1 FAILED, 3 CANCELLED.
int ExitCodeForState(v1::JobState state);

// "rank 0 on w1 (slot 0), rank 1 on w2 (slot 0)".
std::string FormatPlacements(const google::protobuf::RepeatedPtrField<v1::Placement>& placements);

// How long before `now` the time `t` was: "just now", "5m3s ago".
std::string FormatAgo(const google::protobuf::Timestamp& t, absl::Time now);

// "12 KiB", "3.4 MiB".
std::string FormatBytes(int64_t bytes);

// The `cohort status` page: one "field: value" line each (fields without a value are
// left out).
std::string FormatJobStatus(const v1::Job& job, absl::Time now);

// The `cohort list` table.
std::string FormatJobTable(const std::vector<v1::Job>& jobs, absl::Time now);

// A message as one line of JSON, proto field names (snake_case), enums by name.
std::string ToJsonLine(const google::protobuf::Message& message);

}  // namespace cohort::client
