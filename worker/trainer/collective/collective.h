#pragma once

// Collective: the operations that keep the ranks' model replicas in sync. A Collective
// joins `size` processes (ranks), each with its own buffers, and runs the operations
// every rank calls in the same order: AllReduce (sum float32 buffers in place, also
// started asynchronously), Broadcast (one rank's bytes to all) and Barrier.
//
// Backends, each exposing only a factory: Gloo (host memory, TCP; gloo_collective.h) and
// NCCL (CUDA device memory; nccl_collective.h). The contract below holds for both, and
// one contract test suite checks it against each.
//
// - Every rank calls the same operations, with the same sizes and roots, in the same
//   order. Operations run in the order they were started, whatever order their Works
//   are waited in.
// - Buffers belong to the caller. An operation uses its buffer until it completes: a
//   started all-reduce until its Work's Wait returns (or the Work is destroyed). The
//   caller must not touch the buffer meanwhile.
// - No operation waits forever. A peer that dies makes the others' operations fail
//   promptly; one that hangs makes them fail after the backend's timeout. Errors name the
//   peer where the backend can tell:
//     UNAVAILABLE        "all-reduce with rank 1 failed: connection closed (peer died?)"
//     DEADLINE_EXCEEDED  "all-reduce timed out after 30s waiting for rank 1"
//   INVALID_ARGUMENT reports a bad call (null buffer, root out of range).
// - After any error the collective is unusable: every later operation fails with
//   FAILED_PRECONDITION quoting the first error, and the peers' operations fail too. The
//   way out is a new Collective in a new rendezvous namespace (a new attempt).
// - Threads: a Collective and its Works may be called from any thread, one call at a
//   time (the trainer's backward hooks and its main thread take turns). Destroy every
//   Work before the Collective.
//
// There is no "average": the trainer scales each rank's loss by 1/global_batch, so the
// summed gradients are the global mean already.

#include <cstddef>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort::trainer::collective {

enum class DeviceKind { kCpu, kCuda };

// A started operation.
class Work {
 public:
  // Waits for the operation if Wait was not called: the buffer stays in use until then.
  virtual ~Work() = default;
  // Blocks until the operation completes and returns its status (the same status again
  // when called twice).
  virtual absl::Status Wait() = 0;
};

class Collective {
 public:
  virtual ~Collective() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Where buffers live: host memory (kCpu) or device memory of this rank's GPU (kCuda).
  virtual DeviceKind device_kind() const = 0;
  // How all-reduces travel: "tcp", "shared memory" (Gloo between ranks of one machine)
  // or "nccl".
  virtual absl::string_view transport() const = 0;

  // Starts summing `count` float32 values at `data` across all ranks, in place: when it
  // completes every rank's buffer holds the element-wise sum. Returns at once; the
  // operation runs behind the ones started before it. Errors arrive through Wait.
  virtual std::unique_ptr<Work> StartAllReduce(float* data, size_t count) = 0;

  // StartAllReduce and Wait.
  absl::Status AllReduce(float* data, size_t count) { return StartAllReduce(data, count)->Wait(); }

  // Copies `bytes` bytes at `data` on rank `root` to `data` on every rank. Blocks until
  // this rank's copy is complete.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;

  // Returns once every rank has reached the barrier and every operation this rank
  // started before it has completed.
  virtual absl::Status Barrier() = 0;

  // Memory every rank maps, when the backend was asked for it and every rank runs on
  // this machine (Gloo: GlooOptions::shared_floats); empty otherwise. Zero-filled at
  // setup; what the ranks write there is theirs to order with SharedBarrier.
  virtual std::span<float> SharedFloats() { return {}; }
  // Returns once every rank has called it: microseconds through the shared memory, not
  // a network round trip. Only with SharedFloats, and only while no operation of this
  // rank is in flight (it runs on the caller's thread). Fails as an all-reduce does.
  virtual absl::Status SharedBarrier() {
    return absl::FailedPreconditionError("this collective has no shared memory");
  }
};

}  // namespace cohort::trainer::collective
