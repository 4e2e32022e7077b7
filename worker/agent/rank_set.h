#pragma once

// RankSet: the ranks this agent runs, one RankRunner each, keyed by (job, attempt,
// rank). START adds a runner (a duplicate START of a rank still running is ignored),
// STOP stops every rank of an attempt, Running() is Heartbeat.running (docs/job-protocol.md
// rule 3), and finished runners are dropped as they end. Thread-safe.

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/agent/rank_runner.h"

namespace cohort::agent {

class RankSet {
 public:
  // `context` is copied into each runner; what it points to must outlive the set.
  explicit RankSet(RunnerContext context) : context_(std::move(context)) {}
  // Stops every rank (no grace) and joins their threads.
  ~RankSet();

  // Starts the assigned rank; false (and nothing done) when it already runs here or
  // after StopAll() (the agent is shutting down).
  bool Start(const v1::Assignment& assignment);
  // Stop every rank of the attempt (of this agent); return how many were still active.
  int StopAttempt(const std::string& job_id, int attempt);
  int StopAll();

  // Ranks preparing or with a live trainer (stopping ones included).
  std::vector<v1::RankRef> Running();
  // Waits until every runner is done (exits reported); false on timeout.
  bool WaitAllDone(absl::Duration timeout);
  size_t size();

 private:
  using Key = std::tuple<std::string, int, int>;
  // Drops finished runners; returns them so they are destroyed outside the lock.
  std::vector<std::unique_ptr<RankRunner>> TakeDone() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RunnerContext context_;
  absl::Mutex mu_;
  std::map<Key, std::unique_ptr<RankRunner>> runners_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // after StopAll: no more STARTs
};

}  // namespace cohort::agent
