#pragma once

// OpQueue: runs a collective's operations one at a time, in the order they were
// submitted, on a thread it owns. So the trainer can start a bucket's all-reduce from a
// backward hook and keep computing while it runs, and every rank still runs operations
// in one order.
//
// After an operation fails the queue runs nothing more: the operations behind it, and any
// submitted later, complete with FAILED_PRECONDITION quoting the first error (see
// FailureLatch). Submit is thread-safe. The destructor waits for the queued operations
// (each is bounded by its backend's timeout) and joins the thread.

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "worker/trainer/collective/collective.h"
#include "worker/trainer/collective/failure.h"

namespace cohort::trainer::collective {

class OpQueue {
 public:
  OpQueue();
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  // Queues `op` to run on the queue's thread; its status arrives through the Work.
  std::unique_ptr<Work> Submit(std::function<absl::Status()> op);
  // Runs `op` on the calling thread instead, under the same rule: nothing runs after a
  // failure, and its failure stops the queue. Only while no submitted operation is
  // pending (they would not be ordered).
  absl::Status RunHere(const std::function<absl::Status()>& op);

 private:
  // A submitted operation's outcome. Shared by the queue and the Work handle because
  // either may be done with it first (a Work may be destroyed before its op ran).
  struct Outcome {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
  };
  struct Item {
    std::function<absl::Status()> op;
    std::shared_ptr<Outcome> outcome;
  };
  class QueuedWork;

  bool Runnable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();

  FailureLatch latch_;
  absl::Mutex mu_;
  std::deque<Item> items_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace cohort::trainer::collective
