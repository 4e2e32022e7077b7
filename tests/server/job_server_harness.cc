#include "tests/server/job_server_harness.h"

#include <catch2/catch.hpp>

#include "common/transfer/sha256.h"
#include "tests/support/process.h"

namespace cohort::server::testing {

v1::RankRef Rank(const std::string& job_id, int attempt, int rank) {
  v1::RankRef r;
  r.set_job_id(job_id);
  r.set_attempt(attempt);
  r.set_rank(rank);
  return r;
}

v1::Assignment Expect(FakeAgent& agent, v1::AssignmentAction action, absl::Duration timeout) {
  std::optional<v1::Assignment> a = agent.Next(timeout);
  INFO("worker " << agent.name());
  REQUIRE(a.has_value());
  CHECK(a->action() == action);
  return *a;
}

TestServer::TestServer(const std::string& data_dir, CoordinatorOptions options)
    : options_(std::move(options)) {
  options_.listen = *ParseHostPort("127.0.0.1:0", /*allow_port_zero=*/true);
  options_.data_dir = data_dir;
  options_.shutdown_grace = absl::Seconds(1);
  Connect();
}

TestServer::~TestServer() { Stop(); }

void TestServer::Connect() {
  coordinator_ = std::make_unique<Coordinator>(options_);
  absl::Status s = coordinator_->Start();
  INFO(s.ToString());
  REQUIRE(s.ok());
  channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(coordinator_->port()),
                                 grpc::InsecureChannelCredentials());
  jobs_ = v1::JobService::NewStub(channel_);
}

void TestServer::Stop() {
  if (coordinator_) coordinator_->Shutdown();
  coordinator_.reset();
}

void TestServer::Restart() {
  Stop();
  Connect();
}

v1::Job TestServer::Get(const std::string& id) {
  grpc::ClientContext ctx;
  v1::GetJobRequest req;
  req.set_job_id(id);
  v1::Job job;
  grpc::Status s = jobs_->GetJob(&ctx, req, &job);
  INFO(s.error_message());
  REQUIRE(s.ok());
  return job;
}

bool TestServer::WaitForState(const std::string& id, v1::JobState state, absl::Duration timeout) {
  return cohort::testing::WaitUntil([&] { return Get(id).state() == state; }, timeout);
}

v1::Job TestServer::Submit(const v1::JobSpec& spec, const std::string& key) {
  grpc::ClientContext ctx;
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  req.set_idempotency_key(key);
  v1::SubmitJobResponse resp;
  grpc::Status s = jobs_->SubmitJob(&ctx, req, &resp);
  INFO(s.error_message());
  REQUIRE(s.ok());
  return resp.job();
}

std::vector<v1::JobEvent> TestServer::Watch(const std::string& id, int64_t after) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::WatchJobRequest req;
  req.set_job_id(id);
  req.set_after_sequence(after);
  auto reader = jobs_->WatchJob(&ctx, req);
  std::vector<v1::JobEvent> out;
  v1::JobEvent e;
  while (reader->Read(&e)) out.push_back(e);
  grpc::Status s = reader->Finish();
  INFO(s.error_message());
  CHECK(s.ok());
  return out;
}

FakeAgent::~FakeAgent() {
  StopHeartbeats();
  CloseStream();
}

void FakeAgent::Join(TestServer& server, const std::vector<v1::RankRef>& running) {
  StopHeartbeats();
  CloseStream();
  stub_ = v1::WorkerService::NewStub(server.channel());
  running_ = running;
  {
    grpc::ClientContext ctx;
    v1::RegisterRequest req;
    req.set_name(name_);
    req.set_instance_id("instance-" + name_);
    req.set_address("127.0.0.1");
    req.mutable_resources()->set_cpu_slots(slots_);
    v1::RegisterResponse resp;
    grpc::Status s = stub_->Register(&ctx, req, &resp);
    INFO(s.error_message());
    REQUIRE(s.ok());
    lease_ = resp.lease_id();
  }
  auto beat = [this] {
    grpc::ClientContext ctx;
    v1::HeartbeatRequest req;
    req.set_lease_id(lease_);
    for (const v1::RankRef& r : running_) *req.add_running() = r;
    v1::HeartbeatResponse resp;
    return stub_->Heartbeat(&ctx, req, &resp);
  };
  REQUIRE(beat().ok());
  stream_context_ = std::make_unique<grpc::ClientContext>();
  stream_ = std::thread([this, ctx = stream_context_.get()] {
    v1::StreamAssignmentsRequest req;
    req.set_lease_id(lease_);
    auto reader = stub_->StreamAssignments(ctx, req);
    v1::Assignment a;
    while (reader->Read(&a)) {
      absl::MutexLock lock(&mu_);
      received_.push_back(a);
    }
    reader->Finish();
  });
  {
    absl::MutexLock lock(&mu_);
    heartbeats_ = true;
  }
  heartbeat_ = std::thread([this, beat] {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !heartbeats_; };
        if (mu_.AwaitWithTimeout(absl::Condition(&stop), absl::Milliseconds(200))) return;
      }
      beat();
    }
  });
}

void FakeAgent::StopHeartbeats() {
  {
    absl::MutexLock lock(&mu_);
    heartbeats_ = false;
  }
  if (heartbeat_.joinable()) heartbeat_.join();
}

void FakeAgent::CloseStream() {
  if (stream_context_) stream_context_->TryCancel();
  if (stream_.joinable()) stream_.join();
  stream_context_.reset();
}

std::optional<v1::Assignment> FakeAgent::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto any = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !received_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&any), timeout)) return std::nullopt;
  v1::Assignment a = received_.front();
  received_.pop_front();
  return a;
}

grpc::Status FakeAgent::Started(const v1::RankRef& rank) {
  v1::RankEvent e;
  *e.mutable_rank() = rank;
  e.mutable_started()->set_steps_per_epoch(5);
  return Events({e});
}

grpc::Status FakeAgent::Events(const std::vector<v1::RankEvent>& events) {
  grpc::ClientContext ctx;
  v1::ReportEventsResponse resp;
  auto writer = stub_->ReportEvents(&ctx, &resp);
  for (const v1::RankEvent& e : events) writer->Write(e);
  writer->WritesDone();
  return writer->Finish();
}

grpc::Status FakeAgent::Exit(const v1::RankRef& rank, int code, const std::string& message,
                             int signal) {
  grpc::ClientContext ctx;
  v1::ReportExitRequest req;
  *req.mutable_rank() = rank;
  req.set_exit_code(code);
  req.set_signal(signal);
  req.set_message(message);
  v1::ReportExitResponse resp;
  return stub_->ReportExit(&ctx, req, &resp);
}

grpc::Status FakeAgent::Upload(const v1::RankRef& rank, const std::string& name,
                               const std::string& bytes) {
  grpc::ClientContext ctx;
  v1::ArtifactInfo info;
  auto writer = stub_->UploadArtifact(&ctx, &info);
  v1::ArtifactChunk first;
  *first.mutable_header()->mutable_rank() = rank;
  first.mutable_header()->set_name(name);
  first.mutable_header()->set_size_bytes(static_cast<int64_t>(bytes.size()));
  Sha256 h;
  h.Update(bytes);
  first.mutable_header()->set_sha256(h.HexDigest());
  first.set_data(bytes.substr(0, bytes.size() / 2));
  writer->Write(first);
  v1::ArtifactChunk rest;
  rest.set_data(bytes.substr(bytes.size() / 2));
  writer->Write(rest);
  writer->WritesDone();
  return writer->Finish();
}

}  // namespace cohort::server::testing
