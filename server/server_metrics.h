#pragma once

// ServerMetrics: what cohort-server serves on `--metrics-listen HOST:PORT` (GET
// /metrics, Prometheus text format; docs/observability.md lists every metric):
//
//   cohort_jobs{state}                        jobs in the store by state   (gauge)
//   cohort_queue_length                       jobs waiting: QUEUED + RESTARTING
//   cohort_scheduling_latency_seconds         submit (or restart) to placement (histogram)
//   cohort_workers{state}                     registered workers by state  (gauge)
//   cohort_worker_slots{worker,state}         slots per ALIVE worker: total, busy
//   cohort_grpc_server_started_total{grpc_service,grpc_method,grpc_type}
//   cohort_grpc_server_handled_total{grpc_service,grpc_method,grpc_type,grpc_code}
//   cohort_grpc_server_handling_seconds{grpc_service,grpc_method,grpc_type} (histogram)
//   cohort_build_info{version}                1
//
// Listen() binds the HTTP endpoint first (a busy port fails the coordinator before it
// touches the data directory) and serves the RPC metrics at once; Attach() adds the
// job, queue and worker gauges, read on each scrape from the coordinator's own
// structures and from a read connection to the database of its own. The gRPC metrics
// come from a server interceptor: pass InterceptorCreators() to the ServerBuilder.
//
// Thread-safe. Stop() (and the destructor) stop the endpoint; the objects passed to
// Attach must outlive the endpoint.

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/support/server_interceptor.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/address.h"
#include "common/metrics/http_server.h"
#include "common/metrics/registry.h"
#include "server/database.h"

namespace cohort::server {

class JobManager;
class WorkerRegistry;

class ServerMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<ServerMetrics>> Listen(const HostPort& address);
  ~ServerMetrics();

  // `db_path`: the coordinator's database file, opened again for reading counts.
  // `manager` may be null (no slot gauges).
  absl::Status Attach(const std::string& db_path, WorkerRegistry* workers, JobManager* manager);

  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
  InterceptorCreators();

  // A job waited `waited` between being queued (submitted, or RESTARTING) and placed.
  void ObserveSchedulingLatency(absl::Duration waited);

  int port() const { return http_->port(); }
  metrics::Registry& registry() { return registry_; }
  void Stop();

  // The families the interceptor updates.
  struct Rpc {
    metrics::Family<metrics::Counter>* started;
    metrics::Family<metrics::Counter>* handled;
    metrics::Family<metrics::Histogram>* seconds;
  };

 private:
  ServerMetrics() = default;
  absl::Status Register();
  void Collect();

  metrics::Registry registry_;
  Rpc rpc_{};
  metrics::Family<metrics::Gauge>* jobs_ = nullptr;
  metrics::Family<metrics::Gauge>* queue_ = nullptr;
  metrics::Family<metrics::Histogram>* scheduling_ = nullptr;
  metrics::Family<metrics::Gauge>* workers_by_state_ = nullptr;
  metrics::Family<metrics::Gauge>* slots_ = nullptr;
  std::unique_ptr<Database> db_;
  WorkerRegistry* workers_ = nullptr;
  JobManager* manager_ = nullptr;
  std::unique_ptr<metrics::MetricsHttpServer> http_;
};

}  // namespace cohort::server
