#include "worker/agent/rank_set.h"

#include <spdlog/spdlog.h>

#include "common/logging.h"

#include "absl/time/clock.h"

namespace cohort::agent {

RankSet::~RankSet() {
  std::map<Key, std::unique_ptr<RankRunner>> runners;
  {
    absl::MutexLock lock(&mu_);
    runners.swap(runners_);
  }
  runners.clear();  // each destructor stops its rank and joins
}

std::vector<std::unique_ptr<RankRunner>> RankSet::TakeDone() {
  std::vector<std::unique_ptr<RankRunner>> done;
  for (auto it = runners_.begin(); it != runners_.end();) {
    if (it->second->Done()) {
      done.push_back(std::move(it->second));
      it = runners_.erase(it);
    } else {
      ++it;
    }
  }
  return done;
}

bool RankSet::Start(const v1::Assignment& assignment) {
  std::vector<std::unique_ptr<RankRunner>> done;
  absl::MutexLock lock(&mu_);
  done = TakeDone();
  const v1::RankRef& r = assignment.rank();
  if (closed_) {
    spdlog::warn("job {} attempt {} rank {}: START ignored, the agent is stopping", r.job_id(),
                 r.attempt(), r.rank());
    return false;
  }
  Key key{r.job_id(), r.attempt(), r.rank()};
  if (runners_.count(key) != 0) {
    spdlog::warn("job {} attempt {} rank {} already runs here; START ignored", r.job_id(),
                 r.attempt(), r.rank());
    return false;
  }
  runners_[key] = std::make_unique<RankRunner>(context_, assignment);
  return true;
}

int RankSet::StopAttempt(const std::string& job_id, int attempt) {
  absl::MutexLock lock(&mu_);
  int stopped = 0;
  for (auto& [key, runner] : runners_) {
    if (std::get<0>(key) == job_id && std::get<1>(key) == attempt && runner->Active()) {
      runner->Stop();
      ++stopped;
    }
  }
  return stopped;
}

int RankSet::StopAll() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  int active = 0;
  for (auto& [key, runner] : runners_) {
    active += runner->Active();
    runner->Stop();
  }
  return active;
}

std::vector<v1::RankRef> RankSet::Running() {
  std::vector<std::unique_ptr<RankRunner>> done;
  std::vector<v1::RankRef> running;
  absl::MutexLock lock(&mu_);
  done = TakeDone();
  for (auto& [key, runner] : runners_) {
    if (runner->Active()) running.push_back(runner->rank());
  }
  return running;
}

bool RankSet::WaitAllDone(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      bool all = true;
      for (auto& [key, runner] : runners_) all = all && runner->Done();
      if (all) return true;
    }
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
}

size_t RankSet::size() {
  absl::MutexLock lock(&mu_);
  return runners_.size();
}

}  // namespace cohort::agent
