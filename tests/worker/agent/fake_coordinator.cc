#include "tests/worker/agent/fake_coordinator.h"

#include <optional>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "proto/time_convert.h"

namespace cohort::testing {
namespace {

constexpr size_t kChunk = 1000;  // small, so tests see several chunks

template <typename Writer>
grpc::Status SendBytes(const std::string& bytes, int64_t offset, Writer* writer) {
  if (offset < 0 || offset > static_cast<int64_t>(bytes.size())) {
    return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "bad offset");
  }
  for (size_t at = offset; at < bytes.size(); at += kChunk) {
    v1::DataChunk chunk;
    chunk.set_data(bytes.substr(at, kChunk));
    chunk.set_offset(static_cast<int64_t>(at));
    chunk.set_total_bytes(static_cast<int64_t>(bytes.size()));
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "gone");
  }
  return grpc::Status::OK;
}

}  // namespace

class FakeCoordinator::WorkerImpl final : public v1::WorkerService::Service {
 public:
  explicit WorkerImpl(FakeCoordinator* f) : f_(f) {}

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest*,
                        v1::RegisterResponse* response) override {
    absl::MutexLock lock(&f_->mu_);
    ++f_->state_.registers;
    response->set_lease_id(absl::StrCat("lease-", f_->state_.registers));
    ToProto(absl::Seconds(10), response->mutable_lease_ttl());
    ToProto(absl::Milliseconds(200), response->mutable_heartbeat_interval());
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse*) override {
    absl::MutexLock lock(&f_->mu_);
    if (f_->state_.forgotten_leases.count(request->lease_id()) != 0) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown lease");
    }
    f_->state_.heartbeats.push_back(*request);
    return grpc::Status::OK;
  }
  grpc::Status Deregister(grpc::ServerContext*, const v1::DeregisterRequest*,
                          v1::DeregisterResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status StreamAssignments(grpc::ServerContext* context,
                                 const v1::StreamAssignmentsRequest* request,
                                 grpc::ServerWriter<v1::Assignment>* writer) override {
    {
      absl::MutexLock lock(&f_->mu_);
      ++f_->state_.streams_opened;
    }
    auto forgotten = [&] {
      absl::MutexLock lock(&f_->mu_);
      return f_->state_.forgotten_leases.count(request->lease_id()) != 0;
    };
    while (!context->IsCancelled()) {
      if (forgotten()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown lease");
      std::optional<v1::Assignment> next;
      {
        absl::MutexLock lock(&f_->mu_);
        auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(f_->mu_) {
          return !f_->state_.to_send.empty() || f_->shutting_down_;
        };
        f_->mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(100));
        if (f_->shutting_down_) break;
        if (!f_->state_.to_send.empty()) {
          next = f_->state_.to_send.front();
          f_->state_.to_send.pop_front();
        }
      }
      if (next && !writer->Write(*next)) break;
    }
    return grpc::Status::OK;
  }
  grpc::Status RendezvousSet(grpc::ServerContext*, const v1::RendezvousSetRequest* request,
                             v1::RendezvousSetResponse*) override {
    absl::MutexLock lock(&f_->mu_);
    if (f_->state_.open_namespaces.count(request->namespace_()) == 0) {
      return grpc::Status(grpc::StatusCode::ABORTED,
                          absl::StrCat("attempt of ", request->namespace_(), " has ended"));
    }
    f_->state_.keys[absl::StrCat(request->namespace_(), "/", request->key())] = request->value();
    return grpc::Status::OK;
  }
  grpc::Status RendezvousGet(grpc::ServerContext*, const v1::RendezvousGetRequest* request,
                             v1::RendezvousGetResponse* response) override {
    absl::Time deadline = absl::Now() + FromProto(request->timeout());
    absl::MutexLock lock(&f_->mu_);
    while (true) {
      if (f_->state_.open_namespaces.count(request->namespace_()) == 0) {
        return grpc::Status(grpc::StatusCode::ABORTED,
                            absl::StrCat("attempt of ", request->namespace_(), " has ended"));
      }
      std::vector<std::string> missing;
      for (const std::string& key : request->keys()) {
        if (f_->state_.keys.count(absl::StrCat(request->namespace_(), "/", key)) == 0) {
          missing.push_back(key);
        }
      }
      if (missing.empty()) break;
      if (absl::Now() >= deadline) {
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            absl::StrCat("missing keys: ", absl::StrJoin(missing, ", ")));
      }
      static const bool kNever = false;  // a wait that only times out: poll every 20 ms
      f_->mu_.AwaitWithTimeout(absl::Condition(&kNever), absl::Milliseconds(20));
    }
    for (const std::string& key : request->keys()) {
      response->add_values(f_->state_.keys[absl::StrCat(request->namespace_(), "/", key)]);
    }
    return grpc::Status::OK;
  }
  grpc::Status ReportEvents(grpc::ServerContext*, grpc::ServerReader<v1::RankEvent>* reader,
                            v1::ReportEventsResponse*) override {
    v1::RankEvent event;
    while (reader->Read(&event)) {
      absl::MutexLock lock(&f_->mu_);
      f_->state_.events.push_back(event);
    }
    absl::MutexLock lock(&f_->mu_);
    ++f_->state_.event_streams_ended;
    return grpc::Status::OK;
  }
  grpc::Status ReportExit(grpc::ServerContext*, const v1::ReportExitRequest* request,
                          v1::ReportExitResponse*) override {
    absl::MutexLock lock(&f_->mu_);
    if (f_->state_.report_exit_failures > 0) {
      --f_->state_.report_exit_failures;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not now");
    }
    f_->state_.exits.push_back(*request);
    f_->state_.uploads_at_exit.push_back(f_->state_.uploads.size());
    return grpc::Status::OK;
  }
  grpc::Status UploadArtifact(grpc::ServerContext*, grpc::ServerReader<v1::ArtifactChunk>* reader,
                              v1::ArtifactInfo* info) override {
    v1::ArtifactChunk chunk;
    v1::ArtifactHeader header;
    std::string bytes;
    bool first = true;
    while (reader->Read(&chunk)) {
      if (first) header = chunk.header();
      first = false;
      bytes += chunk.data();
    }
    if (first || header.name().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no header");
    }
    if (static_cast<int64_t>(bytes.size()) != header.size_bytes()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "size mismatch");
    }
    absl::MutexLock lock(&f_->mu_);
    f_->state_.uploads[header.name()] = bytes;
    info->set_name(header.name());
    info->set_size_bytes(header.size_bytes());
    info->set_sha256(header.sha256());
    return grpc::Status::OK;
  }
  grpc::Status FetchData(grpc::ServerContext*, const v1::FetchDataRequest* request,
                         grpc::ServerWriter<v1::DataChunk>* writer) override {
    std::string bytes;
    {
      absl::MutexLock lock(&f_->mu_);
      ++f_->state_.fetches[request->artifact_id()];
      auto it = f_->state_.data.find(request->artifact_id());
      if (it == f_->state_.data.end()) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such artifact");
      }
      bytes = it->second;
    }
    return SendBytes(bytes, request->offset(), writer);
  }

 private:
  FakeCoordinator* f_;
};

class FakeCoordinator::JobImpl final : public v1::JobService::Service {
 public:
  explicit JobImpl(FakeCoordinator* f) : f_(f) {}
  grpc::Status DownloadArtifact(grpc::ServerContext*, const v1::DownloadArtifactRequest* request,
                                grpc::ServerWriter<v1::DataChunk>* writer) override {
    std::string bytes;
    {
      absl::MutexLock lock(&f_->mu_);
      auto it = f_->state_.job_artifacts.find(absl::StrCat(request->job_id(), "/", request->name()));
      if (it == f_->state_.job_artifacts.end()) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such artifact");
      }
      bytes = it->second;
    }
    return SendBytes(bytes, request->offset(), writer);
  }

 private:
  FakeCoordinator* f_;
};

FakeCoordinator::FakeCoordinator(int port)
    : worker_(std::make_unique<WorkerImpl>(this)), jobs_(std::make_unique<JobImpl>(this)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &port_);
  builder.RegisterService(worker_.get());
  builder.RegisterService(jobs_.get());
  server_ = builder.BuildAndStart();
}

FakeCoordinator::~FakeCoordinator() {
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
  }
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
}

std::unique_ptr<v1::WorkerService::Stub> FakeCoordinator::WorkerStub() const {
  return v1::WorkerService::NewStub(
      grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
}

std::unique_ptr<v1::JobService::Stub> FakeCoordinator::JobStub() const {
  return v1::JobService::NewStub(grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
}

bool FakeCoordinator::WaitFor(const std::function<bool(const State&)>& condition,
                              absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto holds = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return condition(state_); };
  return mu_.AwaitWithTimeout(absl::Condition(&holds), timeout);
}

}  // namespace cohort::testing
