#pragma once

// Exit codes of `cohort`, for scripts (docs/cli.md).
namespace cohort::client {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;       // the command (or the job) failed
inline constexpr int kExitUsage = 2;        // bad flags or arguments
inline constexpr int kExitCancelled = 3;    // the job was cancelled
inline constexpr int kExitUnreachable = 4;  // the coordinator could not be reached

}  // namespace cohort::client
