#pragma once

// The Gloo backend: collectives over TCP on host memory.
//
// Setup: the ranks join through the Store (rendezvous.h), connect a full mesh of TCP
// pairs (gloo's rendezvous, through an adapter of our Store), and switch the pairs to
// gloo's synchronous mode: the thread that runs an operation reads the sockets itself,
// instead of waking gloo's event-loop thread per message. Broadcasts and barriers run
// gloo's algorithms on these pairs.
//
// All-reduce, the operation training runs every step, travels one of two ways:
// - Ranks that all run on one machine: through shared memory (shm_all_reduce.h;
//   GlooOptions::shared_memory), a fraction of the CPU time and latency of loopback TCP.
// - Otherwise: a streamed ring over connections of its own (tcp_ring.h), connected after
//   the mesh. gloo's own algorithms remain selectable (GlooOptions::algorithm) for
//   comparison; the ring carries several times more on loopback (docs/benchmarks.md).
//
// Operations run on one communication thread per collective (OpQueue), so an all-reduce
// started from a backward hook overlaps the rest of backward. Timeouts: a read or write
// that makes no progress for `timeout` fails the operation; a peer's closed connection
// fails it at once. On any failure this rank closes all its connections, so its peers
// fail promptly too instead of waiting out their timeouts.
//
// With gloo's algorithms, all-reduce buffers of 256 KiB and more keep their algorithm
// (set up for that pointer and size) between calls, as the trainer reuses its gradient
// buckets every step; the kept algorithms hold scratch memory about the size of their
// buffer. Hence, on top of collective.h's contract: for such buffers every rank must
// reuse buffers alike — rank r's call reuses an earlier (data, count) exactly when every
// rank's does. A rank that breaks this gets errors or timeouts, never data written into
// the wrong buffer (received bytes land in the algorithms' own scratch memory).
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

// How ranks that do not share a machine all-reduce.
enum class GlooAlgorithm {
  // The streamed ring over connections of its own (tcp_ring.h): both directions of every
  // link busy at once, the steps overlapped.
  kStreamRing,
  // gloo's algorithms on its synchronous pairs, in segments (max_segment_bytes); kept
  // for comparison (cohort_collective_bench --algorithm).
  kRingChunked,
  kHalvingDoubling,
};

absl::string_view GlooAlgorithmName(GlooAlgorithm algorithm);

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
  GlooAlgorithm algorithm = GlooAlgorithm::kStreamRing;
  // Spin while waiting for data instead of sleeping in the kernel: lower latency for one
  // busy core per rank while an operation runs. Off by default: it starves the backward
  // pass that communication overlaps, unless every rank has a core to spare.
  bool busy_poll = false;
  // gloo's algorithms only: an all-reduce runs as segments of at most this many bytes.
  // Synchronous pairs block in
  // write(2) while the peer writes too, so the bytes a rank sends before reading (half a
  // segment) must fit in the kernel's socket buffers: SO_SNDBUF, which Linux caps at
  // twice net.core.wmem_max (212992 by default), plus the peer's receive window; else the
  // operation fails with a write timeout. 512 KiB fits default buffers; larger segments
  // need a larger wmem_max (on loopback, 256 KiB to 2 MiB measured alike). Must be the
  // same on every rank.
  size_t max_segment_bytes = 512 << 10;
  // All-reduce through a shared-memory segment instead of TCP when every rank runs on
  // this machine (shm_all_reduce.h); broadcasts and barriers stay on TCP. Must be the
  // same on every rank.
  bool shared_memory = true;
};

// Connects this rank to its peers through `store` (not owned; used only during this
// call): a fresh namespace per collective (see store.h). Errors: INVALID_ARGUMENT (bad
// rank/size, unusable hostname or interface), DEADLINE_EXCEEDED (a rank did not join or
// connect within the timeout, named where known), UNAVAILABLE (store or network).
absl::StatusOr<std::unique_ptr<Collective>> CreateGlooCollective(const GlooOptions& options,
                                                                 Store* store);

}  // namespace cohort::trainer::collective
