#include "worker/trainer/collective/op_queue.h"

#include <utility>

namespace cohort::trainer::collective {

class OpQueue::QueuedWork final : public Work {
 public:
  explicit QueuedWork(std::shared_ptr<Outcome> outcome) : outcome_(std::move(outcome)) {}
  ~QueuedWork() override { Wait().IgnoreError(); }

  absl::Status Wait() override {
    Outcome& o = *outcome_;
    absl::MutexLock lock(&o.mu);
    o.mu.Await(absl::Condition(&o.done));
    return o.status;
  }

 private:
  const std::shared_ptr<Outcome> outcome_;
};

OpQueue::OpQueue() : thread_([this] { Loop(); }) {}

OpQueue::~OpQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

std::unique_ptr<Work> OpQueue::Submit(std::function<absl::Status()> op) {
  auto outcome = std::make_shared<Outcome>();
  {
    absl::MutexLock lock(&mu_);
    items_.push_back(Item{std::move(op), outcome});
  }
  return std::make_unique<QueuedWork>(std::move(outcome));
}

absl::Status OpQueue::RunHere(const std::function<absl::Status()>& op) {
  if (absl::Status s = latch_.Check(); !s.ok()) return s;
  return latch_.Record(op());
}

bool OpQueue::Runnable() const { return stopping_ || !items_.empty(); }

void OpQueue::Loop() {
  for (;;) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &OpQueue::Runnable));
      if (items_.empty()) return;  // stopping, and everything queued has run
      item = std::move(items_.front());
      items_.pop_front();
    }
    absl::Status status = latch_.Check();
    if (status.ok()) status = latch_.Record(item.op());
    absl::MutexLock lock(&item.outcome->mu);
    item.outcome->status = std::move(status);
    item.outcome->done = true;
  }
}

}  // namespace cohort::trainer::collective
