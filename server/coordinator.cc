#include "server/coordinator.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include "common/logging.h"

#include "absl/strings/str_cat.h"
#include "server/data_dir.h"
#include "server/listen_check.h"

namespace cohort::server {

Coordinator::Coordinator(CoordinatorOptions options, Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

Coordinator::~Coordinator() {
  if (server_) Shutdown();
}

absl::Status Coordinator::Start() {
  if (absl::Status s = CheckCanListen(options_.listen); !s.ok()) return s;
  if (absl::Status s = PrepareDataDir(options_.data_dir); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Database>> db =
      Database::Open(absl::StrCat(options_.data_dir, "/cohort.db"));
  if (!db.ok()) return db.status();
  db_ = std::move(*db);

  absl::StatusOr<std::unique_ptr<WorkerRegistry>> workers =
      WorkerRegistry::Create(db_.get(), clock_, {.lease_ttl = options_.lease_ttl});
  if (!workers.ok()) return workers.status();
  workers_ = std::move(*workers);
  worker_service_ = std::make_unique<WorkerServiceImpl>(workers_.get());
  cluster_service_ = std::make_unique<ClusterServiceImpl>(workers_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which lets a second server share a busy port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options_.listen.ToString(), grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(cluster_service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen.ToString()));
  }
  server_->GetHealthCheckService()->SetServingStatus(true);

  reaper_ = std::thread([this] { ReapLeases(); });
  spdlog::info("cohort-server listening on {}:{}, data in {}", options_.listen.host, port_,
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
  server_->Shutdown(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(options_.shutdown_grace));
  server_->Wait();
  server_.reset();
  stop_reaper_.Notify();
  if (reaper_.joinable()) reaper_.join();
  spdlog::info("stopped");
}

}  // namespace cohort::server
