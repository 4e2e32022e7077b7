#pragma once

// The Gloo backend's all-reduce between ranks that share one machine (internal to it):
// through a shared-memory segment instead of loopback TCP, whose copies through the
// kernel cost each rank CPU time on the same cores that compute.
//
// Setup (ConnectSharedMemory, after the TCP mesh is up): each rank publishes a host
// identity (boot id, the /dev/shm it sees, its PID namespace) in the store. Only when
// every rank's identity is the same does rank 0 create a segment (shm_open with a random
// name, its memory reserved with posix_fallocate so a full /dev/shm fails here, not with
// SIGBUS later), every rank map it and say whether that worked, and rank 0 unlink it once
// all have: nothing is left in /dev/shm after setup. Every rank decides from the same
// published answers, so all use shared memory or none does (then the TCP path runs).
//
// An all-reduce goes in chunks of kShmChunkBytes, each cut into one slice per rank: each
// rank copies the slices its peers sum into its slot; barrier; rank r sums slice r of
// every rank (its own from its buffer; in rank order, so every rank ends with the same
// bits) into its buffer and the result area; barrier; each rank copies the other
// slices from the result area.
// A barrier spins briefly, then sleeps on a futex in the segment.
//
// The segment can also hold memory the ranks share for their own use (`shared_floats`
// at setup: zero-filled, after the all-reduce's areas), with Barrier() to order their
// reads and writes of it: the trainer keeps one copy of the model's parameters there for
// all ranks (shared_replica.h).
//
// Failures keep collective.h's promises: a wait polls the peers it waits for (a pidfd
// each) and the segment's abort word, and gives up after `timeout` without progress:
//   UNAVAILABLE        "all-reduce with rank 1 failed: connection closed (peer died?)
//                       [shared memory: its process exited]"
//   DEADLINE_EXCEEDED  "all-reduce timed out after 30s waiting for rank 1 [shared memory]"
// A rank that fails sets the abort word, so its peers fail at once too.
//
// Used on one thread at a time: the collective's communication thread, or, for
// Barrier(), the caller's while no operation is in flight.

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/trainer/collective/store.h"

namespace cohort::trainer::collective {

inline constexpr size_t kShmChunkBytes = 2 << 20;

class ShmAllReduce {
 public:
  ~ShmAllReduce();

  absl::Status Run(float* data, size_t count);
  // Returns once every rank has arrived here; fails as Run does, naming "barrier":
  //   UNAVAILABLE "barrier with rank 1 failed: connection closed (peer died?) [...]"
  absl::Status Barrier();
  // Makes every rank's current and later Run and Barrier fail (this rank's too).
  void Abort();
  // The memory asked for at setup (empty if none).
  std::span<float> shared() const { return shared_; }

  struct Segment;  // the shared layout (shm_all_reduce.cc)

 private:
  friend absl::StatusOr<std::unique_ptr<ShmAllReduce>> ConnectSharedMemory(
      int, int, absl::Duration, Store&, size_t);
  ShmAllReduce(int rank, int size, absl::Duration timeout) : rank_(rank), size_(size), timeout_(timeout) {}
  // Arrives at the next barrier and waits for every rank to arrive there; errors name
  // `op`.
  absl::Status Arrive(absl::string_view op);

  const int rank_;
  const int size_;
  const absl::Duration timeout_;
  Segment* segment_ = nullptr;
  size_t mapped_bytes_ = 0;
  float* slots_ = nullptr;   // size_ slots of kShmChunkBytes
  float* result_ = nullptr;  // kShmChunkBytes
  std::span<float> shared_;
  std::vector<int> pidfds_;  // per rank; -1 for this one
  uint32_t barriers_ = 0;    // barriers this rank has arrived at
};

// Null (and no error) when the ranks are not all on this machine, or when shared memory
// cannot be set up here (the reason is logged); every rank gets the same answer.
// `store`: a namespace of this collective's own (its keys start with "shm/").
// `shared_floats`: the size of ShmAllReduce::shared(), reserved like the rest.
absl::StatusOr<std::unique_ptr<ShmAllReduce>> ConnectSharedMemory(int rank, int size,
                                                                  absl::Duration timeout,
                                                                  Store& store,
                                                                  size_t shared_floats = 0);

}  // namespace cohort::trainer::collective
