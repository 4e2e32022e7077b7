#pragma once

// SimWorker: a simulated agent for load runs. It speaks the agent's side of
// docs/job-protocol.md to a real coordinator over real gRPC — Register, a Heartbeat at
// once and then every heartbeat_interval (listing its running ranks), StreamAssignments,
// ReportEvents (started, one step, one epoch end, one log line per rank), rank 0's
// model.keras upload before its ReportExit — but launches no trainer: each START
// "trains" for `run_time` and exits 0. It exists so a load run can drive a thousand jobs
// through the coordinator on a small machine; the coordinator is the part under test.
//
// Silence(d) partitions it for `d`: no heartbeats, its assignment stream dropped, its
// ranks frozen. Past the lease TTL the coordinator marks it LOST and fails the attempts
// that ran there. When the silence ends it behaves as a real agent whose lease expired
// (rule 2 and 3): Heartbeat answers NOT_FOUND, it registers again (same instance id),
// lists its old ranks as running, and reports each one's exit (signal 15) once the
// coordinator STOPs it.
//
// Thread safety: all methods may be called from any thread. The destructor stops it.

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/worker_service.grpc.pb.h"

namespace cohort::bench {

class SimWorker {
 public:
  struct Options {
    std::string name;
    int32_t slots = 8;
    absl::Duration run_time = absl::Milliseconds(200);
  };
  struct Counts {
    int64_t starts = 0;         // START assignments received
    int64_t stops = 0;          // STOP assignments received
    int64_t succeeded = 0;      // ranks that exited 0
    int64_t killed = 0;         // ranks that exited on a STOP (signal 15)
    int64_t registrations = 0;  // Register calls that succeeded (1 + re-registrations)
    int64_t heartbeat_errors = 0;  // heartbeats that failed other than NOT_FOUND
  };

  // Connects to `channel` (shared: stubs share their channel); starts nothing yet.
  SimWorker(std::shared_ptr<grpc::Channel> channel, Options options);
  ~SimWorker();
  SimWorker(const SimWorker&) = delete;
  SimWorker& operator=(const SimWorker&) = delete;

  // Registers and starts heartbeating and streaming. Returns once the first
  // registration succeeded (false after `timeout` without one).
  bool Start(absl::Duration timeout = absl::Seconds(20));
  // Goes silent for `duration` (returns at once).
  void Silence(absl::Duration duration);
  bool silent();
  // Ranks started and not yet reported as exited.
  int32_t running();
  Counts counts();
  // Stops every thread; ranks still running are abandoned (nothing more is reported).
  void Stop();

 private:
  struct Rank {
    v1::RankRef ref;
    std::string spec_name;
    bool stopped = false;
  };

  void HeartbeatLoop();
  void StreamLoop();
  void RunRank(uint64_t key);
  // Waits while silent; false when stopping.
  bool WaitAudible();
  bool Register() ABSL_LOCKS_EXCLUDED(mu_);
  bool RankStopped(uint64_t key);
  void ReportExit(uint64_t key, int32_t exit_code, int32_t signal);

  const Options options_;
  const std::string instance_id_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time silent_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string lease_ ABSL_GUARDED_BY(mu_);       // empty: not registered
  bool stream_ready_ ABSL_GUARDED_BY(mu_) = false;  // the first heartbeat of the lease went out
  absl::Duration interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  grpc::ClientContext* stream_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<uint64_t, Rank> ranks_ ABSL_GUARDED_BY(mu_);
  uint64_t next_key_ ABSL_GUARDED_BY(mu_) = 0;
  Counts counts_ ABSL_GUARDED_BY(mu_);
  int32_t rank_threads_ ABSL_GUARDED_BY(mu_) = 0;  // detached; Stop waits for 0

  std::thread heartbeat_;
  std::thread stream_;
};

}  // namespace cohort::bench
