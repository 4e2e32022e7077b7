#pragma once

// Agent: the node agent of cohort-worker. Registers this worker with the coordinator,
// keeps its lease alive with heartbeats, registers again when the coordinator has
// forgotten the lease (it restarted, or the lease expired during a partition), and
// deregisters on Stop(). See proto/cohort/v1/worker_service.proto for the protocol.
//
// Run() blocks until Stop() is called (from any thread) and then returns OK; it returns
// an error early only when the coordinator refuses this worker's configuration
// (INVALID_ARGUMENT: a bad name, no slots), which retrying cannot fix. An unreachable
// coordinator is retried with capped backoff, forever.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "cohort/v1/worker_service.grpc.pb.h"
#include "common/address.h"

namespace cohort::agent {

struct AgentOptions {
  HostPort coordinator;
  std::string name;
  int cpu_slots = 1;
  // Address other workers' trainers reach this host at.
  std::string advertise_address;
  std::vector<v1::GpuInfo> gpus;
  absl::Duration rpc_timeout = absl::Seconds(5);
  absl::Duration max_backoff = absl::Seconds(2);
};

class Agent {
 public:
  explicit Agent(AgentOptions options);

  absl::Status Run();
  void Stop();

 private:
  // One registration's life: heartbeats until the lease is lost or Stop(). Returns
  // true when Stop() ended it.
  bool KeepLease(const v1::RegisterResponse& lease);
  void Deregister(const std::string& lease_id);
  std::unique_ptr<grpc::ClientContext> Context() const;

  const AgentOptions options_;
  const std::string instance_id_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  absl::Notification stop_;
};

// The local IP address this host uses to reach `peer` (no packet is sent): what the
// agent advertises by default.
std::string LocalAddressToward(const HostPort& peer);

}  // namespace cohort::agent
