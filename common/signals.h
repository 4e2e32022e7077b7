#pragma once

// Termination signals (SIGTERM, SIGINT) for the daemons, handled on a thread of their
// own rather than in an async handler, so shutdown code may take locks and log.
//
// Call BlockTerminationSignals() first thing in main(), before any thread starts (new
// threads inherit the mask); then WaitForTerminationSignal() blocks until one arrives.

namespace cohort {

void BlockTerminationSignals();
// Returns the signal number that arrived.
int WaitForTerminationSignal();

}  // namespace cohort
