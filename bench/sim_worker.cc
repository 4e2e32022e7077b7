#include "bench/sim_worker.h"

#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/transfer/sha256.h"
#include "proto/channel.h"
#include "proto/time_convert.h"

namespace cohort::bench {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(10);
constexpr absl::Duration kPoll = absl::Milliseconds(20);

std::string RandomInstance() {
  std::random_device rd;
  return absl::StrFormat("sim-%08x%08x", rd(), rd());
}

}  // namespace

SimWorker::SimWorker(std::shared_ptr<grpc::Channel> channel, Options options)
    : options_(std::move(options)),
      instance_id_(RandomInstance()),
      stub_(v1::WorkerService::NewStub(std::move(channel))) {}

SimWorker::~SimWorker() { Stop(); }

bool SimWorker::Start(absl::Duration timeout) {
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  stream_ = std::thread([this] { StreamLoop(); });
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stream_ready_; };
  return mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
}

void SimWorker::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (stream_context_) stream_context_->TryCancel();
  }
  if (heartbeat_.joinable()) heartbeat_.join();
  if (stream_.joinable()) stream_.join();
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return rank_threads_ == 0; };
  mu_.Await(absl::Condition(&done));
}

void SimWorker::Silence(absl::Duration duration) {
  absl::MutexLock lock(&mu_);
  silent_until_ = absl::Now() + duration;
  // A partitioned agent's stream is gone as far as it is concerned.
  if (stream_context_) stream_context_->TryCancel();
}

bool SimWorker::silent() {
  absl::MutexLock lock(&mu_);
  return absl::Now() < silent_until_;
}

int32_t SimWorker::running() {
  absl::MutexLock lock(&mu_);
  return static_cast<int32_t>(ranks_.size());
}

SimWorker::Counts SimWorker::counts() {
  absl::MutexLock lock(&mu_);
  return counts_;
}

bool SimWorker::WaitAudible() {
  absl::MutexLock lock(&mu_);
  while (!stopping_ && absl::Now() < silent_until_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), kPoll);  // no one signals: poll the clock
  }
  return !stopping_;
}

bool SimWorker::Register() {
  v1::RegisterRequest request;
  request.set_name(options_.name);
  request.set_instance_id(instance_id_);
  request.set_address("127.0.0.1");
  request.set_version("sim");
  request.mutable_resources()->set_cpu_slots(options_.slots);
  v1::RegisterResponse response;
  grpc::Status status = stub_->Register(ContextWithDeadline(kCallTimeout).get(), request, &response);
  if (!status.ok()) return false;
  absl::MutexLock lock(&mu_);
  lease_ = response.lease_id();
  interval_ = FromProto(response.heartbeat_interval());
  stream_ready_ = false;
  ++counts_.registrations;
  return true;
}

void SimWorker::HeartbeatLoop() {
  while (WaitAudible()) {
    std::string lease;
    {
      absl::MutexLock lock(&mu_);
      lease = lease_;
    }
    if (lease.empty()) {
      if (!Register()) {
        absl::SleepFor(absl::Milliseconds(200));
        continue;
      }
      absl::MutexLock lock(&mu_);
      lease = lease_;
    }
    v1::HeartbeatRequest request;
    request.set_lease_id(lease);
    absl::Duration interval;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [key, rank] : ranks_) *request.add_running() = rank.ref;
      interval = interval_;
    }
    v1::HeartbeatResponse response;
    grpc::Status status =
        stub_->Heartbeat(ContextWithDeadline(kCallTimeout).get(), request, &response);
    {
      absl::MutexLock lock(&mu_);
      if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
        if (lease_ == lease) lease_.clear();  // register again at once
        continue;
      }
      if (!status.ok()) ++counts_.heartbeat_errors;
      if (status.ok() && lease_ == lease) stream_ready_ = true;  // rule 2: then the stream
    }
    // Sleeps the interval, waking early to stop.
    absl::Time next = absl::Now() + interval;
    while (absl::Now() < next) {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), std::min(kPoll * 5, next - absl::Now()));
    }
  }
}

void SimWorker::StreamLoop() {
  while (WaitAudible()) {
    std::string lease;
    grpc::ClientContext context;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stopping_ || (stream_ready_ && absl::Now() >= silent_until_);
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&ready), kPoll * 5) || stopping_) continue;
      lease = lease_;
      stream_context_ = &context;
    }
    v1::StreamAssignmentsRequest request;
    request.set_lease_id(lease);
    auto reader = stub_->StreamAssignments(&context, request);
    v1::Assignment a;
    while (reader->Read(&a)) {
      absl::MutexLock lock(&mu_);
      if (a.action() == v1::ASSIGNMENT_ACTION_START) {
        ++counts_.starts;
        uint64_t key = ++next_key_;
        ranks_[key] = Rank{a.rank(), a.spec().name()};
        ++rank_threads_;
        std::thread([this, key] { RunRank(key); }).detach();
      } else if (a.action() == v1::ASSIGNMENT_ACTION_STOP) {
        ++counts_.stops;
        for (auto& [key, rank] : ranks_) {
          if (rank.ref.job_id() == a.rank().job_id() && rank.ref.attempt() == a.rank().attempt()) {
            rank.stopped = true;
          }
        }
      }
    }
    grpc::Status status = reader->Finish();
    absl::MutexLock lock(&mu_);
    stream_context_ = nullptr;
    // The lease is gone: the heartbeat loop registers again (rule 2).
    if (status.error_code() == grpc::StatusCode::NOT_FOUND && lease_ == lease) lease_.clear();
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) stream_ready_ = false;
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), kPoll * 5);
  }
}

bool SimWorker::RankStopped(uint64_t key) {
  absl::MutexLock lock(&mu_);
  return stopping_ || ranks_.at(key).stopped;
}

void SimWorker::ReportExit(uint64_t key, int32_t exit_code, int32_t signal) {
  v1::ReportExitRequest request;
  {
    absl::MutexLock lock(&mu_);
    *request.mutable_rank() = ranks_.at(key).ref;
  }
  request.set_exit_code(exit_code);
  request.set_signal(signal);
  if (signal != 0) request.set_message("stopped by the coordinator");
  v1::ReportExitResponse response;
  // Retried while the coordinator is reachable: an exit must not be lost (rule 3).
  for (int tries = 0; tries < 5; ++tries) {
    if (!WaitAudible()) return;
    if (stub_->ReportExit(ContextWithDeadline(kCallTimeout).get(), request, &response).ok()) break;
  }
  absl::MutexLock lock(&mu_);
  ++(signal != 0 ? counts_.killed : counts_.succeeded);
  ranks_.erase(key);
}

void SimWorker::RunRank(uint64_t key) {
  v1::RankRef ref;
  {
    absl::MutexLock lock(&mu_);
    ref = ranks_.at(key).ref;
  }
  // Each step waits out a silence (a partitioned host's processes cannot reach the
  // coordinator either) and gives up once STOPped.
  auto step = [&](const std::function<void()>& what) {
    if (!WaitAudible() || RankStopped(key)) return false;
    what();
    return true;
  };
  bool ok = step([&] {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
    v1::ReportEventsResponse response;
    auto writer = stub_->ReportEvents(&context, &response);
    v1::RankEvent e;
    *e.mutable_rank() = ref;
    e.mutable_started()->set_steps_per_epoch(1);
    e.mutable_started()->set_samples(64);
    writer->Write(e);
    e.mutable_step()->set_epoch(1);
    e.mutable_step()->set_epochs(1);
    e.mutable_step()->set_step(1);
    e.mutable_step()->set_steps(1);
    writer->Write(e);
    e.mutable_epoch()->set_epoch(1);
    e.mutable_epoch()->set_epochs(1);
    writer->Write(e);
    e.mutable_log()->set_level(v1::LOG_LEVEL_INFO);
    e.mutable_log()->set_text(absl::StrCat("sim rank ", ref.rank(), " of ", ref.job_id()));
    writer->Write(e);
    writer->WritesDone();
    writer->Finish().IgnoreError();
  });
  // Trains for run_time, in small pieces so a STOP or a silence is seen.
  for (absl::Time end = absl::Now() + options_.run_time; ok && absl::Now() < end;) {
    absl::SleepFor(kPoll);
    ok = WaitAudible() && !RankStopped(key);
  }
  if (ok && ref.rank() == 0) {
    ok = step([&] {
      std::string model = absl::StrCat("sim model of ", ref.job_id(), " attempt ", ref.attempt());
      Sha256 hash;
      hash.Update(model);
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
      v1::ArtifactInfo info;
      auto writer = stub_->UploadArtifact(&context, &info);
      v1::ArtifactChunk chunk;
      *chunk.mutable_header()->mutable_rank() = ref;
      chunk.mutable_header()->set_name("model.keras");
      chunk.mutable_header()->set_size_bytes(static_cast<int64_t>(model.size()));
      chunk.mutable_header()->set_sha256(hash.HexDigest());
      chunk.set_data(model);
      writer->Write(chunk);
      writer->WritesDone();
      writer->Finish().IgnoreError();  // a stale attempt's upload is refused: fine
    });
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      ranks_.erase(key);
      --rank_threads_;
      return;
    }
  }
  // A rank that was STOPped (or lost with its silent worker) reports a signal exit.
  bool stopped = !ok || RankStopped(key);
  if (stopped) {
    // It lives on until the coordinator STOPs it (rule 3 after a lost lease).
    while (WaitAudible() && !RankStopped(key)) absl::SleepFor(kPoll);
  }
  ReportExit(key, stopped ? -1 : 0, stopped ? 15 : 0);
  absl::MutexLock lock(&mu_);
  ranks_.erase(key);
  --rank_threads_;
}

}  // namespace cohort::bench
