#include "worker/agent/event_forwarder.h"

#include <grpcpp/client_context.h>
#include <spdlog/spdlog.h>

#include "common/logging.h"

#include "absl/time/clock.h"
#include "proto/grpc_status.h"

namespace cohort::agent {
namespace {

constexpr absl::Duration kIdleClose = absl::Seconds(2);

bool Droppable(const v1::RankEvent& event) {
  return event.has_step() || event.has_log();
}

}  // namespace

EventForwarder::EventForwarder(v1::WorkerService::StubInterface* stub, Options options)
    : stub_(stub), options_(options), thread_([this] { Loop(); }) {}

EventForwarder::~EventForwarder() { Stop(absl::Seconds(2)); }

void EventForwarder::Push(v1::RankEvent event) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  if (queue_.size() >= options_.max_queued && Droppable(event)) {
    ++dropped_;
    if (!warned_full_) {
      spdlog::warn("the coordinator does not take events; dropping progress and log events");
      warned_full_ = true;
    }
    return;
  }
  queue_.push_back(std::move(event));
}

int64_t EventForwarder::dropped() {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

void EventForwarder::Stop(absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      stop_deadline_ = absl::Now() + timeout;
    }
    // The thread sends what is queued, ends the stream and returns; past the deadline
    // a stream stuck in Write or Finish is cancelled.
    mu_.AwaitWithDeadline(absl::Condition(&finished_), stop_deadline_);
    if (!finished_ && context_ != nullptr) context_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

void EventForwarder::Loop() {
  Sessions();
  absl::MutexLock lock(&mu_);
  finished_ = true;
}

void EventForwarder::Sessions() {
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty() || (stopping_ && absl::Now() >= stop_deadline_)) return;
    }
    grpc::ClientContext context;
    v1::ReportEventsResponse response;
    std::unique_ptr<grpc::ClientWriterInterface<v1::RankEvent>> writer;
    {
      absl::MutexLock lock(&mu_);
      context_ = &context;
      if (stopping_ && absl::Now() >= stop_deadline_) context.TryCancel();
    }
    writer = stub_->ReportEvents(&context, &response);
    bool broken = false;
    while (!broken) {
      v1::RankEvent event;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
        // A stream quiet for kIdleClose is ended (and its events acknowledged by
        // Finish): no call stays open while no rank trains, so a coordinator can shut
        // down without waiting for it. The next event opens a new one.
        if (!mu_.AwaitWithTimeout(absl::Condition(&ready), kIdleClose) || queue_.empty()) break;
        event = queue_.front();
      }
      if (!writer->Write(event)) {
        broken = true;
        break;
      }
      absl::MutexLock lock(&mu_);
      if (!queue_.empty()) queue_.pop_front();
      if (queue_.size() < options_.max_queued / 2) warned_full_ = false;
    }
    if (!broken) writer->WritesDone();
    absl::Status status = FromGrpcStatus(writer->Finish());
    {
      absl::MutexLock lock(&mu_);
      context_ = nullptr;
      if (stopping_ && (queue_.empty() || absl::Now() >= stop_deadline_)) return;
    }
    if (status.ok()) {
      backoff = absl::Milliseconds(100);
      continue;
    }
    spdlog::debug("event stream to the coordinator broke: {}", status.message());
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&stopping), backoff);
      if (stopping_ && absl::Now() >= stop_deadline_) return;
    }
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

}  // namespace cohort::agent
