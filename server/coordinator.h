#pragma once

// Coordinator: the running cohort-server. Owns the database, the registries, the job
// server (job store, artifact store, rendezvous, job manager), the gRPC server (with
// grpc.health.v1 and server reflection) and the lease reaper.
//
// The job store gets its own SQLite connection to the database file, so its
// transactions never take in statements the worker registry runs meanwhile. Jobs left
// running by a previous coordinator are requeued before the server starts serving.
//
// Start() checks, in order, the security settings (a non-loopback --listen needs a
// token file and TLS, or --insecure: docs/security.md), the listen address (the port
// is free), the data directory and the database, so a bad flag or a busy port changes
// nothing on disk. Shutdown()
// turns health NOT_SERVING first, lets in-flight calls finish within `shutdown_grace`,
// then stops. Start and Shutdown are called from one thread; Shutdown at most once.

#include <grpcpp/server.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/address.h"
#include "common/clock.h"
#include "server/cluster_service.h"
#include "server/artifact_store.h"
#include "server/auth.h"
#include "server/database.h"
#include "server/job_manager.h"
#include "server/job_service.h"
#include "server/job_store.h"
#include "server/job_validator.h"
#include "server/rendezvous.h"
#include "server/server_metrics.h"
#include "server/upload_ledger.h"
#include "server/worker_registry.h"
#include "server/worker_service.h"

namespace cohort::server {

// Who may connect and how (docs/security.md). Files are read by main; here they are
// their contents.
struct CoordinatorSecurity {
  std::optional<TokenTable> tokens;  // --token-file; nullopt: no authentication
  std::string tls_cert_pem;          // --tls-cert, with --tls-key: TLS on the gRPC port
  std::string tls_key_pem;
  std::string tls_client_ca_pem;     // --tls-client-ca: agents must present a certificate it signed
  bool insecure = false;             // --insecure: serve a non-loopback address anyway
};

struct CoordinatorOptions {
  HostPort listen;          // port 0: pick a free one (see Coordinator::port())
  std::string data_dir;     // created when missing
  absl::Duration lease_ttl = absl::Seconds(10);
  absl::Duration shutdown_grace = absl::Seconds(10);
  ArtifactStoreOptions artifacts;      // --max-upload-bytes, --max-model-bytes
  int64_t max_queued_jobs = 10000;     // --max-queued-jobs
  int64_t max_queued_jobs_per_user = 0;   // --max-queued-jobs-per-user; 0: no limit
  int64_t max_watches = 1000;          // --max-watches
  int64_t max_upload_bytes_per_user = 0;  // --max-upload-bytes-per-user; 0: no limit
  CoordinatorSecurity security;
  JobLimits limits;                    // --max-model-layers, --allowed-data-root, ...
  absl::Duration start_timeout = absl::Seconds(120);  // --start-timeout
  std::optional<HostPort> metrics_listen;  // --metrics-listen: GET /metrics (server_metrics.h)
  // --health-listen: a plaintext port serving grpc.health.v1 alone (the same status as
  // the main port), for probes that cannot speak TLS (Kubernetes' gRPC probes).
  std::optional<HostPort> health_listen;
  // How long a failing attempt waits for its ranks' exits; zero: lease_ttl + 5s.
  absl::Duration failure_settle = absl::ZeroDuration();
};

class Coordinator {
 public:
  explicit Coordinator(CoordinatorOptions options, Clock* clock = &SystemClock());
  ~Coordinator();

  absl::Status Start();
  void Shutdown();

  // The bound port, valid after Start().
  int port() const { return port_; }
  // The bound --health-listen port, valid after Start() (0 without one).
  int health_port() const { return health_port_; }

 private:
  void ReapLeases();

  const CoordinatorOptions options_;
  Clock* const clock_;
  int port_ = 0;
  int health_port_ = 0;
  std::unique_ptr<Database> db_;
  std::unique_ptr<Database> jobs_db_;  // the job store's own connection
  std::unique_ptr<WorkerRegistry> workers_;
  std::unique_ptr<JobStore> jobs_;
  std::unique_ptr<ArtifactStore> artifacts_;
  std::unique_ptr<Rendezvous> rendezvous_;
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<JobValidator> validator_;
  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<UploadLedger> uploads_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<ClusterServiceImpl> cluster_service_;
  // Declared before server_: the gRPC server (whose interceptors count into it) goes
  // first; its collectors read workers_ and manager_, which outlive it.
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> health_server_;  // --health-listen
  absl::Notification stop_reaper_;
  std::thread reaper_;
};

}  // namespace cohort::server
