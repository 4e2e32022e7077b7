#include "worker/agent/agent.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <thread>

#include <grpcpp/client_context.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/version.h"
#include "proto/channel.h"
#include "proto/grpc_status.h"
#include "proto/time_convert.h"
#include "worker/agent/coordinator_store.h"

namespace cohort::agent {
namespace {

std::string NewInstanceId() {
  std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("%016x", rng());
}

AgentOptions WithDefaults(AgentOptions options) {
  if (options.work_dir.empty()) options.work_dir = "/tmp/cohort-worker-" + options.name;
  return options;
}

}  // namespace

Agent::Agent(AgentOptions options)
    : options_(WithDefaults(std::move(options))), instance_id_(NewInstanceId()) {
  std::shared_ptr<grpc::Channel> channel = CreateCoordinatorChannel(options_.coordinator, options_.security);
  stub_ = v1::WorkerService::NewStub(channel);
  jobs_ = v1::JobService::NewStub(channel);
  cache_ = std::make_unique<DataCache>(options_.work_dir + "/cache", stub_.get());
  events_ = std::make_unique<EventForwarder>(stub_.get(), EventForwarder::Options{});
  RunnerContext context;
  context.worker = stub_.get();
  context.jobs = jobs_.get();
  context.cache = cache_.get();
  context.events = events_.get();
  context.work_dir = options_.work_dir;
  context.launch.trainer_binary = options_.trainer_binary;
  context.launch.coordinator = options_.coordinator;
  context.launch.advertise_address = options_.advertise_address;
  context.launch.threads = options_.threads_per_rank;
  context.launch.env = SecurityEnvironment(options_.security_files);
  context.stop_grace = options_.stop_grace;
  context.rpc_timeout = options_.rpc_timeout;
  context.shutdown = &shutdown_;
  context.metrics = options_.metrics;
  ranks_ = std::make_unique<RankSet>(context);
  assignments_ = std::make_unique<AssignmentLoop>(stub_.get(), ranks_.get());
}

Agent::~Agent() {
  Stop();
  assignments_->Cancel();
  if (stream_thread_.joinable()) stream_thread_.join();
}

std::unique_ptr<grpc::ClientContext> Agent::Context() const {
  return ContextWithDeadline(options_.rpc_timeout);
}

void Agent::Stop() {
  if (options_.health) options_.health->ShuttingDown();
  if (!stop_.HasBeenNotified()) stop_.Notify();
}

void Agent::SetReady(bool ready) {
  if (options_.health) options_.health->SetReady(ready);
}

absl::Status Agent::Run() {
  std::error_code ec;
  std::filesystem::create_directories(options_.work_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("--work-dir ", options_.work_dir, ": ", ec.message()));
  }
  spdlog::info("work dir {}, stop grace {}", options_.work_dir,
               absl::FormatDuration(options_.stop_grace));
  stream_thread_ = std::thread([this] { StreamAssignments(); });

  v1::RegisterRequest request;
  request.set_name(options_.name);
  request.set_instance_id(instance_id_);
  request.set_address(options_.advertise_address);
  request.mutable_resources()->set_cpu_slots(options_.cpu_slots);
  for (const auto& gpu : options_.gpus) *request.mutable_resources()->add_gpus() = gpu;
  request.set_version(kVersion);

  absl::Duration backoff = absl::Milliseconds(100);
  absl::StatusCode last_error = absl::StatusCode::kOk;
  bool stopped_cleanly = false;
  while (!stop_.HasBeenNotified()) {
    v1::RegisterResponse lease;
    absl::Status status = FromGrpcStatus(stub_->Register(Context().get(), request, &lease));
    if (status.ok()) {
      spdlog::info("registered as {} with coordinator {} ({} CPU slots, {} GPUs)", options_.name,
                   options_.coordinator.ToString(), options_.cpu_slots, options_.gpus.size());
      backoff = absl::Milliseconds(100);
      last_error = absl::StatusCode::kOk;
      if (KeepLease(lease)) {
        stopped_cleanly = true;
        break;
      }
      continue;
    }
    if (status.code() == absl::StatusCode::kInvalidArgument) {
      Stop();
      StopRanks(std::nullopt, absl::Seconds(1));
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
  // Stopped while not registered: the ranks still end, their exits are reported as
  // far as the coordinator can be reached.
  if (!stopped_cleanly) StopRanks(std::nullopt, absl::Seconds(1));
  return absl::OkStatus();
}

absl::Status Agent::Heartbeat(const std::string& lease_id) {
  v1::HeartbeatRequest request;
  request.set_lease_id(lease_id);
  for (const v1::RankRef& rank : ranks_->Running()) *request.add_running() = rank;
  v1::HeartbeatResponse response;
  return FromGrpcStatus(stub_->Heartbeat(Context().get(), request, &response));
}

bool Agent::KeepLease(const v1::RegisterResponse& lease) {
  absl::Duration interval = FromProto(lease.heartbeat_interval());
  if (interval <= absl::ZeroDuration()) interval = absl::Seconds(1);
  // One heartbeat at once (with the ranks still running from before), then the stream.
  absl::Status first = Heartbeat(lease.lease_id());
  if (absl::IsNotFound(first)) return false;
  SetReady(first.ok());
  {
    absl::MutexLock lock(&mu_);
    lease_id_ = lease.lease_id();
    lease_lost_ = false;
  }
  auto lose_lease = [this] {
    SetReady(false);
    absl::MutexLock lock(&mu_);
    lease_id_.reset();
  };
  bool warned = false;
  while (true) {
    absl::Time next = absl::Now() + interval;
    bool lost = false;
    while (!stop_.HasBeenNotified() && absl::Now() < next) {
      stop_.WaitForNotificationWithTimeout(std::min(next - absl::Now(), absl::Milliseconds(100)));
      absl::MutexLock lock(&mu_);
      if (lease_lost_) lost = true;
      if (lost) break;
    }
    if (stop_.HasBeenNotified()) break;
    if (lost) {
      spdlog::warn("the coordinator no longer knows this worker's lease; registering again");
      lose_lease();
      return false;
    }
    absl::Status status = Heartbeat(lease.lease_id());
    SetReady(status.ok());
    if (status.ok()) {
      if (warned) spdlog::info("coordinator reachable again");
      warned = false;
      continue;
    }
    if (status.code() == absl::StatusCode::kNotFound) {
      spdlog::warn("coordinator no longer knows this worker's lease ({}); registering again",
                   status.message());
      lose_lease();
      return false;
    }
    if (!warned) {
      spdlog::warn("heartbeat failed: {}; retrying", status.message());
      warned = true;
    }
  }
  StopRanks(lease.lease_id(), interval);
  lose_lease();
  Deregister(lease.lease_id());
  return true;
}

void Agent::StopRanks(const std::optional<std::string>& lease_id, absl::Duration interval) {
  if (!shutdown_.HasBeenNotified()) shutdown_.Notify();
  assignments_->Cancel();
  if (int active = ranks_->StopAll(); active > 0) spdlog::info("stopping {} rank(s)", active);
  // Bounded: the grace, then each runner's bounded exit report, and a margin.
  absl::Time give_up = absl::Now() + options_.stop_grace + absl::Seconds(15);
  while (!ranks_->WaitAllDone(std::min(interval, absl::Seconds(1)))) {
    if (absl::Now() >= give_up) {
      spdlog::warn("ranks still stopping after {}; leaving", absl::FormatDuration(options_.stop_grace));
      break;
    }
    if (lease_id) Heartbeat(*lease_id).IgnoreError();
  }
  events_->Stop(absl::Seconds(2));
}

void Agent::StreamAssignments() {
  absl::Duration backoff = absl::Milliseconds(100);
  absl::StatusCode last_error = absl::StatusCode::kOk;
  while (!stop_.HasBeenNotified()) {
    std::optional<std::string> lease_id;
    {
      absl::MutexLock lock(&mu_);
      lease_id = lease_id_;
    }
    if (!lease_id) {
      stop_.WaitForNotificationWithTimeout(absl::Milliseconds(50));
      continue;
    }
    absl::Time opened = absl::Now();
    absl::Status status = assignments_->Stream(*lease_id);
    if (stop_.HasBeenNotified() || absl::IsCancelled(status)) break;
    if (absl::IsNotFound(status)) {
      absl::MutexLock lock(&mu_);
      if (lease_id_ == lease_id) {
        lease_lost_ = true;
        lease_id_.reset();
      }
      continue;
    }
    if (absl::Now() - opened > absl::Seconds(5)) backoff = absl::Milliseconds(100);
    if (status.code() != last_error) {
      spdlog::warn("assignment stream ended: {}; re-opening",
                   status.ok() ? "closed by the coordinator" : std::string(status.message()));
      last_error = status.code();
    }
    stop_.WaitForNotificationWithTimeout(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void Agent::Deregister(const std::string& lease_id) {
  v1::DeregisterRequest request;
  request.set_lease_id(lease_id);
  v1::DeregisterResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->Deregister(ContextWithDeadline(absl::Seconds(2)).get(), request, &response));
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
