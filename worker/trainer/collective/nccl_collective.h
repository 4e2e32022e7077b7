#pragma once

// The NCCL backend: collectives on CUDA device memory, one GPU per rank, with NCCL's C
// API. Built only when CMake found CUDA and NCCL (COHORT_HAVE_NCCL is 1); runs only where
// a GPU is.
//
// Setup: the ranks join through the Store; rank 0 creates the ncclUniqueId and publishes
// it there; every rank then initialises a non-blocking communicator and polls it against
// the timeout, so a rank that never arrives cannot hang the others (the communicator is
// aborted and DEADLINE_EXCEEDED returned).
//
// Streams. Every operation runs on the collective's own CUDA stream (non-blocking, so it
// never serialises with the caller's work by accident). Before it starts, that stream
// waits — on the GPU, without blocking the caller — for everything queued so far on the
// producer stream, where the caller wrote the buffer (backward's gradients): so a bucket
// can be all-reduced as soon as backward has queued the kernels that fill it. Wait()
// returns once the operation's kernels have finished; after that any stream may use the
// buffer. Broadcast and Barrier block likewise.
//
// Failures. Wait polls the operation's CUDA event and the communicator's asynchronous
// error. A peer's failure surfaces as NCCL's remote or system error (UNAVAILABLE); an
// operation still running `timeout` after Wait was called is DEADLINE_EXCEEDED (NCCL
// cannot say which peer is missing). On any error the communicator is aborted
// (ncclCommAbort), which also ends the kernels still waiting on dead peers.
//
// Bandwidth: NCCL's all-reduce "bus bandwidth" is the algorithm bandwidth (bytes / time)
// times 2(n-1)/n, the fraction of the data each link carries (nccl-tests); on 8xH100/H200
// NVLink nodes expect about 370 GB/s with rings and 480 GB/s with NVLS.

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/trainer/collective/collective.h"
#include "worker/trainer/collective/store.h"

namespace cohort::trainer::collective {

struct NcclOptions {
  int rank = 0;
  int size = 1;
  // The CUDA device this rank uses (ordinal). NCCL needs one GPU per rank.
  int device = 0;
  // Initialisation, and each operation from the moment it is waited on, fail after this.
  absl::Duration timeout = absl::Seconds(30);
  // The cudaStream_t on which the caller writes the buffers it passes in. nullptr means
  // the legacy default stream, where LibTorch queues its kernels unless told otherwise.
  void* producer_stream = nullptr;
};

// Creates this rank's communicator through `store` (not owned; used only during this
// call; a fresh namespace per collective). Errors: INVALID_ARGUMENT (bad rank/size),
// FAILED_PRECONDITION (no such CUDA device), DEADLINE_EXCEEDED (a rank did not join or
// initialise in time), UNAVAILABLE (store, network), INTERNAL (CUDA or NCCL).
absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(const NcclOptions& options,
                                                                 Store* store);

}  // namespace cohort::trainer::collective
