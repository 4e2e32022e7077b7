#pragma once

// The Gloo backend: collectives over TCP on host memory.
//
// Setup: the ranks join through the Store (rendezvous.h), connect a full mesh of TCP
// pairs (gloo's rendezvous, through an adapter of our Store), and switch the pairs to
// gloo's synchronous mode: the thread that runs an operation reads the sockets itself,
// instead of waking gloo's event-loop thread per message. Broadcasts and barriers run
// gloo's algorithms on these pairs.
//
// All-reduce, the operation training runs every step, is our own:
// - Ranks that all run on one machine: through shared memory (shm_all_reduce.h;
//   GlooOptions::shared_memory), a fraction of the CPU time and latency of loopback TCP.
// - Otherwise: a streamed ring over connections of its own (tcp_ring.h), connected after
//   the mesh. It replaced gloo's algorithms, which carried a third of what TCP does
//   (docs/benchmarks.md).
//
// Operations run on one communication thread per collective (OpQueue), so an all-reduce
// started from a backward hook overlaps the rest of backward. Timeouts: a read or write
// that makes no progress for `timeout` fails the operation; a peer's closed connection
// fails it at once. On any failure this rank closes all its connections, so its peers
// fail promptly too instead of waiting out their timeouts.
//
// CreateGlooCollective sets SIGPIPE to be ignored, process-wide: gloo writes to sockets
// with writev(2), which would otherwise kill the process when a peer has died.

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "worker/trainer/collective/collective.h"
#include "worker/trainer/collective/store.h"

namespace cohort::trainer::collective {

struct GlooOptions {
  int rank = 0;
  int size = 1;
  // Rendezvous, connecting, and every read or write of every operation fail after this
  // long without progress.
  absl::Duration timeout = absl::Seconds(30);
  // The address this rank listens on and gives its peers: an IP address, or a name that
  // resolves to one of this host's interfaces. Loopback serves ranks on one host; ranks
  // on several hosts each pass an address the others can reach.
  std::string hostname = "127.0.0.1";
  // A network interface to use instead of `hostname` ("eth0"), when not empty.
  std::string interface;
  // Spin while waiting for data instead of sleeping in the kernel: lower latency for one
  // busy core per rank while an operation runs. Off by default: it starves the backward
  // pass that communication overlaps, unless every rank has a core to spare. (The TCP
  // ring spins 50 us before it sleeps either way.)
  bool busy_poll = false;
  // All-reduce through a shared-memory segment instead of TCP when every rank runs on
  // this machine (shm_all_reduce.h); broadcasts and barriers stay on TCP. Must be the
  // same on every rank.
  bool shared_memory = true;
  // With shared_memory: floats of memory the ranks share besides (Collective::SharedFloats).
  size_t shared_floats = 0;
};

// Connects this rank to its peers through `store` (not owned; used only during this
// call): a fresh namespace per collective (see store.h). Errors: INVALID_ARGUMENT (bad
// rank/size, unusable hostname or interface), DEADLINE_EXCEEDED (a rank did not join or
// connect within the timeout, named where known), UNAVAILABLE (store or network).
absl::StatusOr<std::unique_ptr<Collective>> CreateGlooCollective(const GlooOptions& options,
                                                                 Store* store);

}  // namespace cohort::trainer::collective
