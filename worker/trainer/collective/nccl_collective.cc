#include "worker/trainer/collective/nccl_collective.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "worker/trainer/collective/deadline.h"
#include "worker/trainer/collective/failure.h"
#include "worker/trainer/collective/rendezvous.h"

namespace cohort::trainer::collective {
namespace {

constexpr char kUniqueIdKey[] = "nccl_unique_id";

absl::Status CudaError(absl::string_view what, cudaError_t e) {
  return absl::InternalError(absl::StrCat(what, ": CUDA error: ", cudaGetErrorString(e)));
}

// `comm` may be null (errors before a communicator exists).
absl::Status NcclError(absl::string_view op, ncclResult_t r, ncclComm_t comm) {
  std::string detail = absl::StrCat("nccl: ", ncclGetErrorString(r));
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') absl::StrAppend(&detail, ": ", last);
  }
  switch (r) {
    case ncclRemoteError:
    case ncclSystemError:
      return PeerLost(op, std::nullopt, detail);
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(absl::StrCat(op, " failed: ", detail));
    default:
      return absl::InternalError(absl::StrCat(op, " failed: ", detail));
  }
}

// Polls a non-blocking communicator until its pending call is done (the state leaves
// ncclInProgress). nullopt when `deadline` passed first.
std::optional<ncclResult_t> AwaitComm(ncclComm_t comm, absl::Time deadline) {
  ncclResult_t state = ncclInProgress;
  bool done = PollUntil(deadline, [&] {
    if (ncclResult_t r = ncclCommGetAsyncError(comm, &state); r != ncclSuccess) state = r;
    return state != ncclInProgress;
  });
  if (!done) return std::nullopt;
  return state;
}

class NcclCollective;

class NcclWork final : public Work {
 public:
  NcclWork(NcclCollective* owner, std::string op, cudaEvent_t done)
      : owner_(owner), op_(std::move(op)), done_(done) {}
  ~NcclWork() override;
  absl::Status Wait() override;

 private:
  NcclCollective* const owner_;
  const std::string op_;
  cudaEvent_t done_;
  std::optional<absl::Status> status_;
};

class NcclCollective final : public Collective {
 public:
  NcclCollective(const NcclOptions& options, ncclComm_t comm, cudaStream_t stream,
                 cudaEvent_t ready, float* scratch)
      : options_(options), comm_(comm), stream_(stream), ready_(ready), scratch_(scratch) {}

  ~NcclCollective() override {
    cudaSetDevice(options_.device);
    if (!aborted_) {
      // A clean shutdown flushes the communicator; if that does not finish in time (a
      // peer is gone), abort instead.
      ncclResult_t r = ncclCommFinalize(comm_);
      std::optional<ncclResult_t> state =
          r == ncclSuccess || r == ncclInProgress
              ? AwaitComm(comm_, absl::Now() + options_.timeout)
              : std::optional<ncclResult_t>(r);
      if (state == ncclSuccess) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    }
    cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
    cudaFree(scratch_);
  }

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  DeviceKind device_kind() const override { return DeviceKind::kCuda; }
  absl::string_view transport() const override { return "nccl"; }

  std::unique_ptr<Work> StartAllReduce(float* data, size_t count) override {
    if (data == nullptr && count > 0) {
      return CompletedWork(Fail(absl::InvalidArgumentError("all-reduce of a null buffer")));
    }
    return Launch("all-reduce", [&] {
      return ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_);
    });
  }

  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= options_.size) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("broadcast root ", root, " is outside [0, ", options_.size, ")")));
    }
    if (data == nullptr && bytes > 0) {
      return Fail(absl::InvalidArgumentError("broadcast of a null buffer"));
    }
    return Launch("broadcast",
                  [&] { return ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_); })
        ->Wait();
  }

  absl::Status Barrier() override {
    return Launch("barrier", [&] {
             return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_);
           })
        ->Wait();
  }

  // For NcclWork::Wait: polls `done` until the operation finished, failed or timed out.
  absl::Status AwaitEvent(absl::string_view op, cudaEvent_t done) {
    if (absl::Status s = latch_.Check(); !s.ok()) return s;
    absl::Status status;
    bool finished = PollUntil(
        absl::Now() + options_.timeout,
        [&] {
          cudaError_t q = cudaEventQuery(done);
          if (q == cudaSuccess) return true;
          if (q != cudaErrorNotReady) {
            status = CudaError(op, q);
            return true;
          }
          ncclResult_t state = ncclSuccess;
          ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
          if (r != ncclSuccess) state = r;
          if (state != ncclSuccess && state != ncclInProgress) {
            status = NcclError(op, state, comm_);
            return true;
          }
          return false;
        },
        absl::Microseconds(5), absl::Milliseconds(1));
    if (!finished) {
      status = PeerTimedOut(op, std::nullopt, options_.timeout,
                            "nccl: the operation did not finish; the communicator was aborted");
    }
    return status.ok() ? status : Fail(std::move(status));
  }

 private:
  // Queues one NCCL call on our stream behind the producer stream's work, and an event
  // after it.
  std::unique_ptr<Work> Launch(absl::string_view op, const std::function<ncclResult_t()>& call) {
    if (absl::Status s = latch_.Check(); !s.ok()) return CompletedWork(s);
    auto producer = static_cast<cudaStream_t>(options_.producer_stream);
    cudaError_t e = cudaSetDevice(options_.device);
    if (e == cudaSuccess) e = cudaEventRecord(ready_, producer);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream_, ready_, 0);
    if (e != cudaSuccess) return CompletedWork(Fail(CudaError(op, e)));
    ncclResult_t r = call();
    if (r == ncclInProgress) {
      std::optional<ncclResult_t> state = AwaitComm(comm_, absl::Now() + options_.timeout);
      if (!state) {
        return CompletedWork(Fail(PeerTimedOut(op, std::nullopt, options_.timeout,
                                               "nccl: the call did not return")));
      }
      r = *state;
    }
    if (r != ncclSuccess) return CompletedWork(Fail(NcclError(op, r, comm_)));
    cudaEvent_t done = nullptr;
    e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(done, stream_);
    if (e != cudaSuccess) {
      if (done != nullptr) cudaEventDestroy(done);
      return CompletedWork(Fail(CudaError(op, e)));
    }
    return std::make_unique<NcclWork>(this, std::string(op), done);
  }

  // Records the first failure and aborts the communicator, which also ends kernels
  // still waiting for dead peers.
  absl::Status Fail(absl::Status status) {
    latch_.Record(status).IgnoreError();
    if (!aborted_) {
      aborted_ = true;
      ncclCommAbort(comm_);
    }
    return status;
  }

  const NcclOptions options_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  cudaEvent_t ready_;  // recorded on the producer stream before each operation
  float* scratch_;     // one float on the device for Barrier to sum; its value means nothing
  FailureLatch latch_;
  bool aborted_ = false;
};

NcclWork::~NcclWork() {
  Wait().IgnoreError();
  cudaEventDestroy(done_);
}

absl::Status NcclWork::Wait() {
  if (!status_) status_ = owner_->AwaitEvent(op_, done_);
  return *status_;
}

absl::StatusOr<ncclUniqueId> ShareUniqueId(const NcclOptions& options, Store& store) {
  ncclUniqueId id;
  if (options.rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      return NcclError("nccl: creating the unique id", r, nullptr);
    }
    if (absl::Status s = store.Set(kUniqueIdKey, absl::string_view(id.internal, sizeof(id)));
        !s.ok()) {
      return s;
    }
    return id;
  }
  absl::StatusOr<std::vector<std::string>> got = store.Get({kUniqueIdKey}, options.timeout);
  if (!got.ok()) return got.status();
  if (got->front().size() != sizeof(id.internal)) {
    return absl::InvalidArgumentError(absl::StrCat("nccl: the unique id in the store has ",
                                                   got->front().size(), " bytes, not ",
                                                   sizeof(id.internal)));
  }
  got->front().copy(id.internal, sizeof(id.internal));
  return id;
}

absl::StatusOr<ncclComm_t> InitComm(const NcclOptions& options, const ncclUniqueId& id) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, options.size, id, options.rank, &config);
  if (r == ncclInProgress) {
    std::optional<ncclResult_t> state = AwaitComm(comm, absl::Now() + options.timeout);
    if (!state) {
      ncclCommAbort(comm);
      return PeerTimedOut("nccl: initialising the communicator", std::nullopt, options.timeout,
                          absl::StrCat("rank ", options.rank, " of ", options.size));
    }
    r = *state;
  }
  if (r != ncclSuccess) {
    absl::Status status = NcclError("nccl: initialising the communicator", r, comm);
    if (comm != nullptr) ncclCommAbort(comm);
    return status;
  }
  return comm;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(const NcclOptions& options,
                                                                 Store* store) {
  if (absl::Status s = ValidateRankAndSize("nccl", options.rank, options.size); !s.ok()) return s;
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("nccl: timeout must be positive");
  }
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || options.device < 0 || options.device >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "nccl: no CUDA device ", options.device, " (", e == cudaSuccess ? count : 0,
        " found", e == cudaSuccess ? "" : absl::StrCat(": ", cudaGetErrorString(e)), ")"));
  }
  if (e = cudaSetDevice(options.device); e != cudaSuccess) return CudaError("nccl: device", e);
  if (absl::Status s = JoinRendezvous(*store, options.rank, options.size, options.timeout);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<ncclUniqueId> id = ShareUniqueId(options, *store);
  if (!id.ok()) return id.status();
  absl::StatusOr<ncclComm_t> comm = InitComm(options, *id);
  if (!comm.ok()) return comm.status();

  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;
  float* scratch = nullptr;
  e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaMalloc(reinterpret_cast<void**>(&scratch), sizeof(float));
  if (e != cudaSuccess) {
    ncclCommAbort(*comm);
    if (ready != nullptr) cudaEventDestroy(ready);
    if (stream != nullptr) cudaStreamDestroy(stream);
    return CudaError("nccl: creating the stream", e);
  }
  return std::unique_ptr<Collective>(
      new NcclCollective(options, *comm, stream, ready, scratch));
}

}  // namespace cohort::trainer::collective
