#pragma once

// HealthServer: cohort-worker's grpc.health.v1.Health on `--health-listen HOST:PORT`,
// for Kubernetes' native gRPC probes (deploy/k8s, docs/kubernetes.md). Plaintext, as
// the kubelet probes; it serves nothing but the health service. Two service names:
//
//   ""          readiness: SERVING while the agent holds a lease with the coordinator
//               (registered, and its last heartbeat answered). NOT_SERVING before it has
//               registered, while the coordinator cannot be reached or has forgotten the
//               lease (until it registers again), and from the moment it shuts down.
//   "liveness"  SERVING while the agent runs, NOT_SERVING from the moment it shuts down.
//               It does not follow the coordinator: restarting agents while the
//               coordinator is away would only kill the ranks they run.
//
// The agent (agent.h) drives it; any other name is NOT_FOUND, as gRPC's health service
// answers. Thread-safe.

#include <memory>

#include "absl/status/statusor.h"
#include "common/address.h"

namespace grpc {
class Server;
}

namespace cohort::agent {

class HealthServer {
 public:
  inline static constexpr char kLiveness[] = "liveness";

  // Binds and starts serving: readiness NOT_SERVING, liveness SERVING. UNAVAILABLE
  // naming the address when it cannot listen there (a busy port, not this host's).
  static absl::StatusOr<std::unique_ptr<HealthServer>> Listen(const HostPort& address);
  ~HealthServer();  // stops serving at once

  // Readiness: whether the agent holds a lease. Ignored once ShuttingDown() was called.
  void SetReady(bool ready);
  // Both NOT_SERVING, for good (gRPC's health service then takes no more updates).
  void ShuttingDown();
  int port() const { return port_; }

 private:
  class Unimplemented;
  HealthServer(std::unique_ptr<Unimplemented> unimplemented, std::unique_ptr<grpc::Server> server,
               int port);
  std::unique_ptr<Unimplemented> unimplemented_;  // outlives server_ (declared first)
  std::unique_ptr<grpc::Server> server_;
  const int port_;
};

}  // namespace cohort::agent
