#pragma once

// Termination signals (SIGTERM, SIGINT) for the daemons, handled on a thread of their
// own rather than in an async handler, so shutdown code may take locks and log.
//
// Call CatchTerminationSignals() in main() before the signals may arrive; then
// WaitForTerminationSignal() blocks until one arrives. The installed handler only
// writes the signal's number to a pipe (async-signal-safe), so it does not matter which
// thread the kernel picks: threads that libraries start before main() (OpenBLAS starts
// its pool in a library constructor) have the signals unblocked, so blocking them in
// main() and calling sigwait() would let such a thread take the default action and end
// the process. Children exec'd later get the default actions back (execve resets
// handled signals); the pipe is close-on-exec.

namespace cohort {

void CatchTerminationSignals();
// Returns the signal number that arrived. Needs CatchTerminationSignals() first.
int WaitForTerminationSignal();

}  // namespace cohort
