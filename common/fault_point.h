#pragma once

// Fault points: named places in cohort-worker (the agent and the trainer) where the
// fault-injection suite (tests/faults/) holds a process still so that it can be
// killed exactly there: during the rendezvous, mid-step, mid-checkpoint-write,
// mid-upload. docs/reliability.md lists the points and the faults tried at them.
//
// Inert unless the environment names a point. With
//
//   COHORT_FAULT_DIR=DIR  COHORT_FAULT_POINT=NAME[@N]
//
// the N-th time (default the first) a process reaches FaultPoint(NAME), it creates
// DIR/NAME.hit holding its pid (atomically, and only if no process created it before:
// a point fires once per DIR, not again in the next attempt's processes), then waits
// until DIR/NAME.go exists, or at most 120 s, and carries on. Any other call returns at
// once after one comparison; the environment is read on the first call.
//
// Thread-safe.

#include "absl/strings/string_view.h"

namespace cohort {

void FaultPoint(absl::string_view name);

}  // namespace cohort
