#include "worker/agent/agent.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>

#include <grpcpp/client_context.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/version.h"
#include "proto/channel.h"
#include "proto/grpc_status.h"
#include "proto/time_convert.h"

namespace cohort::agent {
namespace {

std::string NewInstanceId() {
  std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("%016x", rng());
}

}  // namespace

Agent::Agent(AgentOptions options)
    : options_(std::move(options)),
      instance_id_(NewInstanceId()),
      stub_(v1::WorkerService::NewStub(CreateCoordinatorChannel(options_.coordinator))) {}

std::unique_ptr<grpc::ClientContext> Agent::Context() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        absl::ToChronoMilliseconds(options_.rpc_timeout));
  return context;
}

void Agent::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
}

absl::Status Agent::Run() {
  v1::RegisterRequest request;
  request.set_name(options_.name);
  request.set_instance_id(instance_id_);
  request.set_address(options_.advertise_address);
  request.mutable_resources()->set_cpu_slots(options_.cpu_slots);
  for (const auto& gpu : options_.gpus) *request.mutable_resources()->add_gpus() = gpu;
  request.set_version(kVersion);

  absl::Duration backoff = absl::Milliseconds(100);
  absl::StatusCode last_error = absl::StatusCode::kOk;
  while (!stop_.HasBeenNotified()) {
    v1::RegisterResponse lease;
    absl::Status status = FromGrpcStatus(stub_->Register(Context().get(), request, &lease));
    if (status.ok()) {
      spdlog::info("registered as {} with coordinator {} ({} CPU slots, {} GPUs)", options_.name,
                   options_.coordinator.ToString(), options_.cpu_slots, options_.gpus.size());
      backoff = absl::Milliseconds(100);
      last_error = absl::StatusCode::kOk;
      if (KeepLease(lease)) break;
      continue;
    }
    if (status.code() == absl::StatusCode::kInvalidArgument) {
      return absl::InvalidArgumentError(
          absl::StrCat("the coordinator refused this worker: ", status.message()));
    }
    // Log a failure once per kind, not every retry.
    if (status.code() != last_error) {
      spdlog::warn("cannot register with coordinator {}: {}; retrying",
                   options_.coordinator.ToString(), status.message());
      last_error = status.code();
    }
    stop_.WaitForNotificationWithTimeout(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  return absl::OkStatus();
}

bool Agent::KeepLease(const v1::RegisterResponse& lease) {
  absl::Duration interval = FromProto(lease.heartbeat_interval());
  bool warned = false;
  while (!stop_.WaitForNotificationWithTimeout(interval)) {
    v1::HeartbeatRequest request;
    request.set_lease_id(lease.lease_id());
    v1::HeartbeatResponse response;
    absl::Status status = FromGrpcStatus(stub_->Heartbeat(Context().get(), request, &response));
    if (status.ok()) {
      if (warned) spdlog::info("coordinator reachable again");
      warned = false;
      continue;
    }
    if (status.code() == absl::StatusCode::kNotFound) {
      spdlog::warn("coordinator no longer knows this worker's lease ({}); registering again",
                   status.message());
      return false;
    }
    if (!warned) {
      spdlog::warn("heartbeat failed: {}; retrying", status.message());
      warned = true;
    }
  }
  Deregister(lease.lease_id());
  return true;
}

void Agent::Deregister(const std::string& lease_id) {
  v1::DeregisterRequest request;
  request.set_lease_id(lease_id);
  v1::DeregisterResponse response;
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  absl::Status status = FromGrpcStatus(stub_->Deregister(context.get(), request, &response));
  if (status.ok()) {
    spdlog::info("deregistered from coordinator");
  } else {
    spdlog::warn("could not deregister (the lease will expire): {}", status.message());
  }
}

std::string LocalAddressToward(const HostPort& peer) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  std::string fallback = "127.0.0.1";
  if (getaddrinfo(peer.host.c_str(), std::to_string(peer.port).c_str(), &hints, &found) != 0) {
    return fallback;
  }
  std::string result = fallback;
  int fd = socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    char host[NI_MAXHOST];
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        getnameinfo(reinterpret_cast<sockaddr*>(&local), len, host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) == 0) {
      result = host;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return result;
}

}  // namespace cohort::agent
