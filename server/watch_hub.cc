#include "server/watch_hub.h"

namespace cohort::server {

WatchHub::Subscription::Subscription(WatchHub* hub, std::string job_id)
    : hub_(hub), job_id_(std::move(job_id)) {
  absl::MutexLock lock(&hub_->mu_);
  ++hub_->jobs_[job_id_].watchers;
}

WatchHub::Subscription::~Subscription() {
  absl::MutexLock lock(&hub_->mu_);
  auto it = hub_->jobs_.find(job_id_);
  if (--it->second.watchers == 0) hub_->jobs_.erase(it);
}

uint64_t WatchHub::Subscription::Generation() {
  absl::MutexLock lock(&hub_->mu_);
  return hub_->jobs_.at(job_id_).generation;
}

void WatchHub::Subscription::Wait(uint64_t seen, absl::Duration timeout) {
  absl::MutexLock lock(&hub_->mu_);
  const Entry& entry = hub_->jobs_.at(job_id_);  // stable: this subscription keeps it
  auto changed = [&]() ABSL_SHARED_LOCKS_REQUIRED(hub_->mu_) {
    return entry.generation != seen || hub_->closed_;
  };
  hub_->mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
}

void WatchHub::Notify(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) ++it->second.generation;
}

void WatchHub::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool WatchHub::closed() {
  absl::MutexLock lock(&mu_);
  return closed_;
}

size_t WatchHub::watched_jobs() {
  absl::MutexLock lock(&mu_);
  return jobs_.size();
}

}  // namespace cohort::server
