#include "worker/agent/health_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace cohort::agent {

// Every method but the health service's: UNIMPLEMENTED. gRPC builds no server without a
// service of its own to poll for (the health service is added at start).
class HealthServer::Unimplemented : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "only grpc.health.v1 here")); }
      void OnDone() override { delete this; }
    };
    return new Reactor;
  }
};

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Listen(const HostPort& address) {
  grpc::EnableDefaultHealthCheckService(true);
  auto unimplemented = std::make_unique<Unimplemented>();
  grpc::ServerBuilder builder;
  builder.RegisterCallbackGenericService(unimplemented.get());
  // gRPC sets SO_REUSEPORT by default, which lets a second server share a busy port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort(address.ToString(), grpc::InsecureServerCredentials(), &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    return absl::UnavailableError(absl::StrCat("--health-listen ", address.ToString(),
                                               ": cannot listen there (the port is in use, or "
                                               "the host is not an address of this machine)"));
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus("", false);
  health->SetServingStatus(kLiveness, true);
  spdlog::info("gRPC health on {}:{} (\"\": registered with the coordinator, \"{}\": running)",
               address.host, port, kLiveness);
  return std::unique_ptr<HealthServer>(
      new HealthServer(std::move(unimplemented), std::move(server), port));
}

HealthServer::HealthServer(std::unique_ptr<Unimplemented> unimplemented,
                           std::unique_ptr<grpc::Server> server, int port)
    : unimplemented_(std::move(unimplemented)), server_(std::move(server)), port_(port) {}

HealthServer::~HealthServer() {
  ShuttingDown();
  server_->Shutdown(std::chrono::system_clock::now());
}

void HealthServer::SetReady(bool ready) {
  server_->GetHealthCheckService()->SetServingStatus("", ready);
}

void HealthServer::ShuttingDown() { server_->GetHealthCheckService()->Shutdown(); }

}  // namespace cohort::agent
