#pragma once

// Coordinator: the running cohort-server. Owns the database, the registries, the gRPC
// server (with grpc.health.v1 and server reflection) and the lease reaper.
//
// Start() checks, in order, the listen address (the port is free), the data directory
// and the database, so a bad flag or a busy port changes nothing on disk. Shutdown()
// turns health NOT_SERVING first, lets in-flight calls finish within `shutdown_grace`,
// then stops. Start and Shutdown are called from one thread; Shutdown at most once.

#include <grpcpp/server.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/address.h"
#include "common/clock.h"
#include "server/cluster_service.h"
#include "server/database.h"
#include "server/worker_registry.h"
#include "server/worker_service.h"

namespace cohort::server {

struct CoordinatorOptions {
  HostPort listen;          // port 0: pick a free one (see Coordinator::port())
  std::string data_dir;     // created when missing
  absl::Duration lease_ttl = absl::Seconds(10);
  absl::Duration shutdown_grace = absl::Seconds(10);
};

class Coordinator {
 public:
  explicit Coordinator(CoordinatorOptions options, Clock* clock = &SystemClock());
  ~Coordinator();

  absl::Status Start();
  void Shutdown();

  // The bound port, valid after Start().
  int port() const { return port_; }

 private:
  void ReapLeases();

  const CoordinatorOptions options_;
  Clock* const clock_;
  int port_ = 0;
  std::unique_ptr<Database> db_;
  std::unique_ptr<WorkerRegistry> workers_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<ClusterServiceImpl> cluster_service_;
  std::unique_ptr<grpc::Server> server_;
  absl::Notification stop_reaper_;
  std::thread reaper_;
};

}  // namespace cohort::server
