#include "worker/trainer/collective/gloo_collective.h"

#include <algorithm>
#include <csignal>
#include <exception>
#include <functional>
#include <utility>

#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>

#include "absl/strings/str_cat.h"
#include "worker/trainer/collective/gloo_mesh.h"
#include "worker/trainer/collective/op_queue.h"
#include "worker/trainer/collective/shm_all_reduce.h"
#include "worker/trainer/collective/tcp_ring.h"

namespace cohort::trainer::collective {
namespace {

constexpr size_t kBroadcastChunkBytes = 16 << 20;

class GlooCollective final : public Collective {
 public:
  GlooCollective(const GlooOptions& options, std::shared_ptr<GlooContext> context,
                 std::unique_ptr<ShmAllReduce> shm, std::unique_ptr<TcpRing> ring)
      : options_(options),
        context_(std::move(context)),
        shm_(std::move(shm)),
        ring_(std::move(ring)),
        // Built here, identically on every rank, so its slots match.
        barrier_(std::make_unique<gloo::BarrierAllToAll>(context_)) {}

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  DeviceKind device_kind() const override { return DeviceKind::kCpu; }
  absl::string_view transport() const override { return shm_ ? "shared memory" : "tcp"; }

  std::unique_ptr<Work> StartAllReduce(float* data, size_t count) override {
    return queue_.Submit([this, data, count] {
      return Guarded("all-reduce", [&] {
        if (data == nullptr && count > 0) {
          return absl::InvalidArgumentError("all-reduce of a null buffer");
        }
        if (shm_) return shm_->Run(data, count);
        if (ring_) return ring_->AllReduce(data, count);
        return absl::OkStatus();  // a world of one rank
      });
    });
  }

  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    return queue_
        .Submit([this, data, bytes, root] {
          return Guarded("broadcast", [&] {
            if (root < 0 || root >= options_.size) {
              return absl::InvalidArgumentError(
                  absl::StrCat("broadcast root ", root, " is outside [0, ", options_.size, ")"));
            }
            if (data == nullptr && bytes > 0) {
              return absl::InvalidArgumentError("broadcast of a null buffer");
            }
            if (options_.size == 1) return absl::OkStatus();
            // In chunks: the root sends to one rank at a time while the others wait, and
            // a rank that waits longer than the timeout for its first byte gives up.
            for (size_t offset = 0; offset < bytes; offset += kBroadcastChunkBytes) {
              std::vector<uint8_t*> ptrs{static_cast<uint8_t*>(data) + offset};
              size_t n = std::min(kBroadcastChunkBytes, bytes - offset);
              context_
                  ->BuildEphemeral([&] {
                    return std::make_unique<gloo::BroadcastOneToAll<uint8_t>>(context_, ptrs, n,
                                                                              root);
                  })
                  ->run();
            }
            return absl::OkStatus();
          });
        })
        ->Wait();
  }

  std::span<float> SharedFloats() override {
    return shm_ ? shm_->shared() : std::span<float>();
  }

  absl::Status SharedBarrier() override {
    if (!shm_ || shm_->shared().empty()) return Collective::SharedBarrier();
    return queue_.RunHere([this] { return Guarded("barrier", [&] { return shm_->Barrier(); }); });
  }

  absl::Status Barrier() override {
    return queue_
        .Submit([this] {
          return Guarded("barrier", [&] {
            barrier_->run();
            return absl::OkStatus();
          });
        })
        ->Wait();
  }

 private:
  // Runs `body` (on the communication thread), turning gloo's exceptions into a status.
  // On any failure it closes every connection: the peers then fail at once ("connection
  // closed") instead of waiting out their timeouts.
  absl::Status Guarded(absl::string_view op, const std::function<absl::Status()>& body) {
    absl::Status status;
    try {
      status = body();
    } catch (const std::exception& e) {
      std::optional<int> peer = FailedPeer(*context_, options_.busy_poll, e.what());
      status = TranslateGlooError(op, peer, options_.timeout, e.what());
    }
    if (!status.ok()) {
      context_->closeConnections();
      if (shm_) shm_->Abort();
      if (ring_) ring_->Abort();
    }
    return status;
  }

  const GlooOptions options_;
  const std::shared_ptr<GlooContext> context_;
  std::unique_ptr<ShmAllReduce> shm_;  // all-reduces when every rank is on this machine
  std::unique_ptr<TcpRing> ring_;      // all-reduces otherwise (null in a world of one)
  std::unique_ptr<gloo::BarrierAllToAll> barrier_;
  OpQueue queue_;  // last: its thread stops before the members it uses are destroyed
};

}  // namespace

absl::StatusOr<std::unique_ptr<Collective>> CreateGlooCollective(const GlooOptions& options,
                                                                 Store* store) {
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("gloo: timeout must be positive");
  }
  std::signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::shared_ptr<GlooContext>> context = ConnectGlooMesh(options, *store);
  if (!context.ok()) return context.status();
  std::unique_ptr<ShmAllReduce> shm;
  if (options.shared_memory) {
    absl::StatusOr<std::unique_ptr<ShmAllReduce>> connected =
        ConnectSharedMemory(options.rank, options.size, options.timeout, *store,
                            options.shared_floats);
    if (!connected.ok()) return connected.status();
    shm = *std::move(connected);
  }
  std::unique_ptr<TcpRing> ring;
  if (!shm) {
    absl::StatusOr<std::unique_ptr<TcpRing>> connected = ConnectTcpRing(options, *store);
    if (!connected.ok()) return connected.status();
    ring = *std::move(connected);
  }
  try {
    return std::unique_ptr<Collective>(
        new GlooCollective(options, *std::move(context), std::move(shm), std::move(ring)));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("gloo: setting up the barrier: ", e.what()));
  }
}

}  // namespace cohort::trainer::collective
