#pragma once

// `cohort watch JOB`, `cohort logs JOB [-f]` and the watching half of
// `cohort submit --follow`: streams a job's events with JobService.WatchJob and prints
// them with a ProgressRenderer (client/progress.h).
//
// The stream has no deadline (a job may train for days; --timeout bounds the unary
// calls only). When it breaks (the coordinator restarted, the network dropped) the
// watcher reconnects with after_sequence = the last event it printed, so nothing is
// printed twice or lost, and gives up with kExitUnreachable after `reconnect_for`
// without a connection. Ctrl-C detaches (client/interrupt.h) and prints how to
// reattach; the job keeps running.

#include <string>

#include "absl/time/time.h"
#include "client/call.h"
#include "client/interrupt.h"
#include "client/progress.h"

namespace cohort::client {

struct WatchOptions {
  std::string job_id;
  ProgressStyle style = ProgressStyle::kPlain;
  bool color = false;
  bool logs_only = false;  // kJson: only what `cohort logs` shows
  int columns = 0;         // kTty: the terminal's width (0: unknown)
  // false: print the events stored so far and stop (`cohort logs` without -f).
  bool follow = true;
  absl::Duration reconnect_for = absl::Minutes(5);
};

// Returns the exit code: the job's final state for a followed job (0 SUCCEEDED,
// 1 FAILED, 3 CANCELLED), 0 when not following, kExitInterrupted after a detach,
// kExitUnreachable when the coordinator could not be reached, 1 for other errors.
int WatchJob(const Connection& connection, const WatchOptions& options,
             InterruptWatcher& interrupt);

// The style `-o` asks for: "json", "plain", "tty", or "auto" (a TTY on stdout, unless
// TERM is "dumb", gets kTty). Color on a TTY unless NO_COLOR is set.
ProgressStyle StyleFromFlag(const std::string& output, bool* color);

// The width of the terminal on stdout, or 0 when stdout is not one.
int TerminalColumns();

}  // namespace cohort::client
