#pragma once

// WatchHub: wakes the WatchJob streams of one job when that job has a new event.
//
// Each watched job has a counter, bumped by Notify(job_id) after an event of that job
// is stored; a watch waits for its own job's counter to move, so an event wakes only
// the streams watching that job, not every stream (with 200 watchers and a burst of
// submits, a shared counter woke 200 streams, each querying the store, per event).
// Counters exist only while somebody watches the job; Notify of an unwatched job costs
// one map lookup.
//
// Use: Subscribe before reading the store, read Generation(), query the events, then
// Wait(generation, timeout): an event stored after the query wakes it, one stored
// before it was seen by the query.
//
// Thread safety: all methods may be called from any thread.

#include <cstdint>
#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort::server {

class WatchHub {
 public:
  // Registers a watcher of one job for its lifetime.
  class Subscription {
   public:
    Subscription(WatchHub* hub, std::string job_id);
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

    uint64_t Generation();
    // Returns once the job's counter passes `seen`, `timeout` passes, or Close() was called.
    void Wait(uint64_t seen, absl::Duration timeout);

   private:
    WatchHub* const hub_;
    const std::string job_id_;
  };

  void Notify(const std::string& job_id);
  // Wakes every watcher for good (shutdown).
  void Close();
  bool closed();
  // Jobs with at least one watcher (for tests and metrics).
  size_t watched_jobs();

 private:
  struct Entry {
    uint64_t generation = 0;
    int32_t watchers = 0;
  };
  absl::Mutex mu_;
  std::map<std::string, Entry> jobs_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cohort::server
