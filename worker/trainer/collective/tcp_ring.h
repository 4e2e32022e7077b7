#pragma once

// TcpRing: the Gloo backend's all-reduce between ranks that do not share a machine: a
// ring over TCP connections of its own, streamed.
//
// Why not gloo's algorithms: gloo's synchronous pairs block in write(2) while the peer
// writes too, so a rank sends a whole half-segment before it reads anything, and the
// operation is segmented to fit the kernel's socket buffers; measured on loopback it
// carried 23-31% of what TCP carries, below c10d (docs/benchmarks.md). gloo's
// asynchronous pairs wake an event-loop thread per message.
//
// The ring: rank r sends to rank r+1 and receives from rank r-1, each over its own
// connection, one thread doing both with non-blocking calls, so both directions of every
// link are busy at once and nothing waits on a full socket buffer. The buffer is cut into
// `size` chunks; reduce-scatter, then all-gather, as the usual ring, but streamed: what
// arrives is summed into the buffer as it arrives, and what the next step sends (the
// chunk just received) leaves as soon as its first bytes are summed, so the 2(size-1)
// steps overlap instead of following one another. Each chunk is summed along one path
// and then copied, so every rank ends with the same bits. A rank with nothing to do spins
// for 50 us before it sleeps in poll(2): the peer's bytes usually come sooner than a
// wake-up would (4 KiB on loopback: ~90 -> ~15 us).
//
// Failures: a peer that closes its connection fails the operation at once (UNAVAILABLE,
// naming it); no progress in either direction for `timeout` fails it (DEADLINE_EXCEEDED,
// naming the peer this rank waits for). Abort() shuts both connections down, so the
// neighbours fail at once too.

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/trainer/collective/gloo_collective.h"
#include "worker/trainer/collective/store.h"

namespace cohort::trainer::collective {

class TcpRing {
 public:
  ~TcpRing();
  TcpRing(const TcpRing&) = delete;
  TcpRing& operator=(const TcpRing&) = delete;

  // Sums `count` floats at `data` across the ring, in place. Not thread-safe: one
  // operation at a time.
  absl::Status AllReduce(float* data, size_t count);

  // Shuts both connections down: this rank's operations and its neighbours' fail.
  void Abort();

 private:
  friend absl::StatusOr<std::unique_ptr<TcpRing>> ConnectTcpRing(const GlooOptions& options,
                                                                   Store& store);
  TcpRing(const GlooOptions& options, int next_fd, int prev_fd);

  const GlooOptions options_;
  const int next_fd_;         // to rank + 1: this rank sends here
  const int prev_fd_;         // from rank - 1: this rank receives here
  std::vector<float> scratch_;  // where reduce-scatter bytes arrive, used as a ring
};

// Listens on `options`' address (rank, size, hostname or interface, timeout and
// busy_poll apply), publishes this rank's address in `store` (keys "ring/addr/<rank>"), connects
// to rank + 1 and accepts rank - 1. Null for a world of one rank. Errors:
// INVALID_ARGUMENT (no such address or interface), DEADLINE_EXCEEDED (a neighbour did not
// publish or connect within the timeout, named), UNAVAILABLE (network).
absl::StatusOr<std::unique_ptr<TcpRing>> ConnectTcpRing(const GlooOptions& options,
                                                         Store& store);

}  // namespace cohort::trainer::collective
