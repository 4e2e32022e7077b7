#pragma once

// `cohort submit`: resolves the flags into a job spec (client/submit_spec.h), uploads
// the files with --upload, submits with an idempotency key, prints the job id, and with
// --follow watches the job to its end (client/watch.h).
//
// A submit that fails to reach the coordinator is retried a few times with the same
// idempotency key, so the retry returns the job the first try may have created rather
// than a second one.

#include <string>

#include "client/call.h"
#include "client/interrupt.h"
#include "client/submit_spec.h"
#include "client/watch.h"

namespace cohort::client {

struct SubmitOptions {
  SubmitFlags flags;
  std::string cwd;          // relative paths are resolved against it
  bool dry_run = false;     // print the coordinator's resolved spec; store nothing
  bool upload = false;      // upload the model and data instead of passing paths
  bool follow = false;      // watch the job after submitting
  std::string idempotency_key;  // empty: a random one
  std::string output = "auto";  // as WatchOptions: auto, tty, plain, json
};

// Returns the exit code: 2 for bad flags and for a job the coordinator refused
// (INVALID_ARGUMENT; its message names the field), 4 when the coordinator cannot be
// reached; with --follow, the job's final state (client/watch.h).
int RunSubmitCommand(const Connection& connection, const SubmitOptions& options,
                     InterruptWatcher* interrupt);

// 32 random hex digits.
std::string RandomIdempotencyKey();

// The spec the coordinator's dry run returned, as YAML (docs/job-spec.md). Uploaded
// files show as "artifact:<id>".
absl::StatusOr<std::string> ResolvedSpecYaml(const v1::JobSpec& spec);

}  // namespace cohort::client
