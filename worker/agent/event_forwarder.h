#pragma once

// EventForwarder: streams RankEvents to the coordinator (WorkerService.ReportEvents)
// from a queue, on a thread of its own, so the trainers' pipes never wait for the
// network.
//
// Push() never blocks: events wait in a queue of at most `max_queued`; when it is full
// (the coordinator unreachable for long) new step and log events are dropped (counted,
// and logged once per outage), while `started` and epoch events are still kept — the
// coordinator needs `started` to move an attempt to RUNNING. A broken stream is
// re-opened with capped backoff; the event whose write failed is sent again. A stream
// with nothing to send for two seconds is ended cleanly and opened again on the next
// event.
// Thread-safe.

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/worker_service.grpc.pb.h"

namespace cohort::agent {

// Where rank runners put their events. Push must not block.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Push(v1::RankEvent event) = 0;
};

class EventForwarder final : public EventSink {
 public:
  struct Options {
    size_t max_queued = 10000;
    absl::Duration max_backoff = absl::Seconds(2);
  };
  // `stub` is not owned and must outlive the forwarder.
  EventForwarder(v1::WorkerService::StubInterface* stub, Options options);
  // Sends what is queued for up to `flush_timeout` (see Stop), then ends the stream.
  ~EventForwarder() override;

  void Push(v1::RankEvent event) override;

  // Sends what is queued and ends the stream (WritesDone, Finish) within `timeout`,
  // else cancels it; joins the thread. Later Pushes are dropped. Idempotent.
  void Stop(absl::Duration timeout);

  int64_t dropped();

 private:
  void Loop();
  void Sessions();  // streams until stopped

  v1::WorkerService::StubInterface* const stub_;
  const Options options_;
  absl::Mutex mu_;
  std::deque<v1::RankEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time stop_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool warned_full_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // the thread has returned
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;  // the open stream's
  std::thread thread_;
};

}  // namespace cohort::agent
