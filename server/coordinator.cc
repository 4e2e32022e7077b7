#include "server/coordinator.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include "common/logging.h"

#include "absl/strings/str_cat.h"
#include "proto/channel.h"
#include "server/data_dir.h"
#include "server/listen_check.h"

namespace cohort::server {

Coordinator::Coordinator(CoordinatorOptions options, Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

Coordinator::~Coordinator() {
  if (server_) Shutdown();
}

absl::Status Coordinator::Start() {
  const CoordinatorSecurity& security = options_.security;
  if (absl::Status s = CheckListenSecurity(options_.listen, security.tokens.has_value(),
                                           !security.tls_cert_pem.empty(), security.insecure);
      !s.ok()) {
    return s;
  }
  if (!security.tls_client_ca_pem.empty() && security.tls_cert_pem.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS)");
  }
  if (absl::Status s = CheckCanListen(options_.listen); !s.ok()) return s;
  if (options_.health_listen) {
    if (absl::Status s = CheckCanListen(*options_.health_listen); !s.ok()) return s;
  }
  if (options_.metrics_listen) {
    absl::StatusOr<std::unique_ptr<ServerMetrics>> metrics = ServerMetrics::Listen(*options_.metrics_listen);
    if (!metrics.ok()) return metrics.status();
    metrics_ = std::move(*metrics);
  }
  if (absl::Status s = PrepareDataDir(options_.data_dir); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Database>> db =
      Database::Open(absl::StrCat(options_.data_dir, "/cohort.db"));
  if (!db.ok()) return db.status();
  db_ = std::move(*db);

  absl::StatusOr<std::unique_ptr<WorkerRegistry>> workers =
      WorkerRegistry::Create(db_.get(), clock_, {.lease_ttl = options_.lease_ttl});
  if (!workers.ok()) return workers.status();
  workers_ = std::move(*workers);
  absl::StatusOr<std::unique_ptr<Database>> jobs_db =
      Database::Open(absl::StrCat(options_.data_dir, "/cohort.db"));
  if (!jobs_db.ok()) return jobs_db.status();
  jobs_db_ = std::move(*jobs_db);
  absl::StatusOr<std::unique_ptr<JobStore>> jobs = JobStore::Create(jobs_db_.get(), clock_);
  if (!jobs.ok()) return jobs.status();
  jobs_ = std::move(*jobs);
  absl::StatusOr<std::unique_ptr<ArtifactStore>> artifacts =
      ArtifactStore::Create(options_.data_dir, options_.artifacts);
  if (!artifacts.ok()) return artifacts.status();
  artifacts_ = std::move(*artifacts);
  rendezvous_ = std::make_unique<Rendezvous>();
  manager_ = std::make_unique<JobManager>(jobs_.get(), workers_.get(), artifacts_.get(),
                                          rendezvous_.get(), clock_,
                                          JobManagerOptions{
                                              .start_timeout = options_.start_timeout,
                                              .failure_settle =
                                                  options_.failure_settle > absl::ZeroDuration()
                                                      ? options_.failure_settle
                                                      : options_.lease_ttl + absl::Seconds(5),
                                              .on_first_placement = [this](absl::Duration waited) {
                                                if (metrics_) metrics_->ObserveSchedulingLatency(waited);
                                              }});
  if (absl::Status s = manager_->Recover(); !s.ok()) return s;
  WorkerRegistry* registry = workers_.get();
  validator_ = std::make_unique<JobValidator>(artifacts_.get(), [registry] {
    std::vector<WorkerCapacity> out;
    for (const v1::WorkerInfo& w : registry->List()) {
      WorkerCapacity c;
      c.name = w.name();
      c.total_cpu_slots = w.resources().cpu_slots();
      c.total_gpus = w.resources().gpus_size();
      for (int32_t i = 0; i < c.total_cpu_slots; ++i) c.free_cpu_slots.push_back(i);
      for (const v1::GpuInfo& g : w.resources().gpus()) c.free_gpus.push_back(g.index());
      out.push_back(std::move(c));
    }
    return out;
  }, options_.limits);
  authorizer_ = std::make_unique<Authorizer>(security.tokens, !security.tls_client_ca_pem.empty());
  uploads_ = std::make_unique<UploadLedger>(db_.get());
  job_service_ = std::make_unique<JobServiceImpl>(
      jobs_.get(), artifacts_.get(), validator_.get(), manager_.get(), authorizer_.get(),
      uploads_.get(),
      JobServiceOptions{.max_queued_jobs = options_.max_queued_jobs,
                        .max_queued_jobs_per_user = options_.max_queued_jobs_per_user,
                        .max_upload_bytes_per_user = options_.max_upload_bytes_per_user,
                        .max_watches = options_.max_watches});
  worker_service_ = std::make_unique<WorkerServiceImpl>(authorizer_.get(), workers_.get(),
                                                        manager_.get(), rendezvous_.get(),
                                                        artifacts_.get());
  cluster_service_ =
      std::make_unique<ClusterServiceImpl>(authorizer_.get(), workers_.get(), manager_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (metrics_) {
    if (absl::Status s = metrics_->Attach(absl::StrCat(options_.data_dir, "/cohort.db"), workers_.get(),
                                          manager_.get());
        !s.ok()) {
      return s;
    }
    builder.experimental().SetInterceptorCreators(metrics_->InterceptorCreators());
  }
  // gRPC sets SO_REUSEPORT by default, which lets a second server share a busy port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!security.tls_cert_pem.empty()) {
    // With a client CA, a certificate is checked when presented and required only of
    // agents (server/auth.h), so users and probes connect with the server's alone.
    grpc::SslServerCredentialsOptions tls(security.tls_client_ca_pem.empty()
                                              ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                              : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_key_cert_pairs.push_back({security.tls_key_pem, security.tls_cert_pem});
    tls.pem_root_certs = security.tls_client_ca_pem;
    credentials = grpc::SslServerCredentials(tls);
  }
  builder.AddListeningPort(options_.listen.ToString(), credentials, &port_);
  // Chunks are at most 1 MiB, but a job may carry its .keras file inline.
  const int64_t max_message = std::min<int64_t>(
      INT32_MAX, std::max<int64_t>(options_.artifacts.max_model_bytes, kTransferChunkBytes) +
                     (int64_t{1} << 20));
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_message));
  builder.SetMaxSendMessageSize(kMaxReplyBytes);
  builder.RegisterService(job_service_.get());
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(cluster_service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options_.listen.ToString(),
        security.tls_cert_pem.empty() ? "" : " (with TLS: is --tls-key the key of --tls-cert?)"));
  }
  if (options_.health_listen) {
    grpc::ServerBuilder health;
    health.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    health.AddListeningPort(options_.health_listen->ToString(), grpc::InsecureServerCredentials(),
                            &health_port_);
    health_server_ = health.BuildAndStart();
    if (!health_server_ || health_port_ == 0) {
      health_server_.reset();
      return absl::UnavailableError(
          absl::StrCat("--health-listen: cannot listen on ", options_.health_listen->ToString()));
    }
    health_server_->GetHealthCheckService()->SetServingStatus(true);
  }
  server_->GetHealthCheckService()->SetServingStatus(true);

  manager_->Start();
  reaper_ = std::thread([this] { ReapLeases(); });
  spdlog::info("cohort-server listening on {}:{} ({}, {}), data in {}", options_.listen.host, port_,
               security.tls_cert_pem.empty() ? "plaintext"
               : security.tls_client_ca_pem.empty() ? "TLS"
                                                    : "TLS, agents with client certificates",
               security.tokens ? absl::StrCat(security.tokens->size(), " tokens")
                               : std::string("no authentication"),
               options_.data_dir);
  return absl::OkStatus();
}

void Coordinator::ReapLeases() {
  absl::Duration period = std::min(options_.lease_ttl / 4, absl::Seconds(1));
  while (!stop_reaper_.WaitForNotificationWithTimeout(period)) {
    workers_->ExpireLeases();
  }
}

void Coordinator::Shutdown() {
  if (!server_) return;
  spdlog::info("shutting down: health NOT_SERVING, finishing in-flight calls");
  server_->GetHealthCheckService()->SetServingStatus(false);
  if (health_server_) health_server_->GetHealthCheckService()->SetServingStatus(false);
  // Long calls (assignment streams, watches, rendezvous reads) end now, not at the
  // grace deadline.
  manager_->Stop();
  rendezvous_->Close();
  server_->Shutdown(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(options_.shutdown_grace));
  server_->Wait();
  server_.reset();
  if (health_server_) {
    health_server_->Shutdown(std::chrono::system_clock::now());
    health_server_->Wait();
    health_server_.reset();
  }
  stop_reaper_.Notify();
  if (reaper_.joinable()) reaper_.join();
  if (metrics_) metrics_->Stop();
  spdlog::info("stopped");
}

}  // namespace cohort::server
