#pragma once

// Agent: the node agent of cohort-worker (docs/job-protocol.md rules 1-3, 5-9).
//
// Leases: registers this worker with the coordinator, sends one Heartbeat at once
// (with the ranks it runs), then keeps the lease alive every heartbeat_interval and
// registers again when the coordinator has forgotten it (it restarted, or the lease
// expired during a partition).
//
// Assignments: a thread of its own keeps a StreamAssignments stream open for the
// current lease, re-opening it when it breaks (and having the lease renewed when the
// coordinator answers NOT_FOUND). START and STOP go to the RankSet: one RankRunner per
// rank (rank_runner.h) fetches the data, launches `cohort-worker train`, forwards its
// events through the EventForwarder, uploads rank 0's outputs and reports the exit.
//
// Health (options.health, health_server.h): ready while a lease is held and its
// heartbeats are answered; not ready, and not live, from the moment Stop() is called.
//
// Stop() (SIGTERM/SIGINT): every rank is stopped (SIGTERM, SIGKILL after stop_grace)
// while heartbeats go on, their exits are reported, then the agent deregisters.
//
// Run() blocks until Stop() is called (from any thread) and then returns OK; it returns
// an error early only when the coordinator refuses this worker's configuration
// (INVALID_ARGUMENT: a bad name, no slots), which retrying cannot fix, or when the work
// directory cannot be created. An unreachable coordinator is retried with capped
// backoff, forever.

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "cohort/v1/worker_service.grpc.pb.h"
#include "common/address.h"
#include "proto/channel.h"
#include "worker/agent/agent_metrics.h"
#include "worker/agent/artifact_transfer.h"
#include "worker/agent/assignment_loop.h"
#include "worker/agent/event_forwarder.h"
#include "worker/agent/health_server.h"
#include "worker/agent/rank_set.h"

namespace cohort::agent {

struct AgentOptions {
  HostPort coordinator;
  std::string name;
  int cpu_slots = 1;
  // Address other workers' trainers reach this host at.
  std::string advertise_address;
  // The token and TLS settings of every call to the coordinator, and the files they
  // came from (absolute paths), which the trainers get (docs/security.md).
  ChannelSecurity security;
  ChannelSecurityFiles security_files;
  std::vector<v1::GpuInfo> gpus;
  absl::Duration rpc_timeout = absl::Seconds(5);
  absl::Duration max_backoff = absl::Seconds(2);
  // cache/, jobs/ (trainer_launch.h). Empty: /tmp/cohort-worker-<name>.
  std::string work_dir;
  // SIGTERM to SIGKILL, for STOP and shutdown.
  absl::Duration stop_grace = absl::Seconds(10);
  // The binary whose `train` subcommand runs a rank.
  std::string trainer_binary = "/proc/self/exe";
  // LibTorch threads per CPU rank (--threads); 0: the trainer's default (cores divided
  // by the job's world size, right when all ranks share this host, as in local tests).
  int threads_per_rank = 0;
  // --metrics-listen: where the ranks' statistics go; not owned, null when off.
  AgentMetrics* metrics = nullptr;
  // --health-listen: told whether a lease is held and when the agent shuts down; not
  // owned, null when off.
  HealthServer* health = nullptr;
};

class Agent {
 public:
  explicit Agent(AgentOptions options);
  ~Agent();

  absl::Status Run();
  void Stop();

 private:
  // One registration's life: heartbeats until the lease is lost or Stop(). Returns
  // true when Stop() ended it (ranks stopped, deregistered).
  bool KeepLease(const v1::RegisterResponse& lease);
  absl::Status Heartbeat(const std::string& lease_id);
  // Stops every rank and waits for their exits to be reported, heartbeating `lease_id`
  // (when set) meanwhile.
  void StopRanks(const std::optional<std::string>& lease_id, absl::Duration interval);
  void Deregister(const std::string& lease_id);
  void StreamAssignments();
  std::unique_ptr<grpc::ClientContext> Context() const;
  void SetReady(bool ready);

  const AgentOptions options_;
  const std::string instance_id_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  absl::Notification stop_;
  absl::Notification shutdown_;  // runners: report exits for a bounded time only
  std::unique_ptr<DataCache> cache_;
  std::unique_ptr<EventForwarder> events_;
  std::unique_ptr<RankSet> ranks_;
  std::unique_ptr<AssignmentLoop> assignments_;

  absl::Mutex mu_;
  std::optional<std::string> lease_id_ ABSL_GUARDED_BY(mu_);  // published after the first heartbeat
  bool lease_lost_ ABSL_GUARDED_BY(mu_) = false;  // the stream saw NOT_FOUND
  std::thread stream_thread_;
};

// The local IP address this host uses to reach `peer` (no packet is sent): what the
// agent advertises by default.
std::string LocalAddressToward(const HostPort& peer);

}  // namespace cohort::agent
