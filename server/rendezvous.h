#pragma once

// Rendezvous: the coordinator's small key-value store through which the ranks of one
// job attempt find each other (Gloo addresses, the NCCL unique id). docs/job-protocol.md rule 4.
//
// Each attempt has a namespace "<job_id>/<attempt>", opened when the attempt starts
// (STARTING) and dropped when it ends (a rank fails, the job is cancelled, succeeds or
// fails). Set and Get on a namespace that is not open answer ABORTED "attempt N of job
// X has ended". Get blocks until every requested key exists, then returns the values
// in the order asked; past `timeout` it answers DEADLINE_EXCEEDED naming the missing
// keys. Drop wakes every blocked Get of the namespace with ABORTED, and Close() wakes
// all of them (coordinator shutdown), so no caller waits forever.
//
// Limits: keys 1-512 bytes, values up to 1 MiB, 4096 keys per namespace, 1024 keys per
// Get (INVALID_ARGUMENT / RESOURCE_EXHAUSTED beyond).
//
// Thread safety: all methods may be called from any thread.

#include <map>
#include <string>
#include <vector>
#include <functional>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort::server {

class Rendezvous {
 public:
  static std::string Namespace(const std::string& job_id, int attempt);

  // Opening an open namespace keeps its keys.
  void Open(const std::string& ns);
  void Drop(const std::string& ns);
  // Drops everything and refuses all later calls (ABORTED "the coordinator is shutting down").
  void Close();

  absl::Status Set(const std::string& ns, const std::string& key, std::string value);
  // `timeout` <= 0 means 5 minutes; it is capped at 30 minutes. `cancelled`, when set,
  // is polled about once a second (the caller went away: CANCELLED).
  absl::StatusOr<std::vector<std::string>> Get(const std::string& ns,
                                               const std::vector<std::string>& keys,
                                               absl::Duration timeout,
                                               const std::function<bool()>& cancelled = nullptr);

  bool IsOpen(const std::string& ns);

 private:
  absl::Status Ended(const std::string& ns) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<std::string, std::map<std::string, std::string>> spaces_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cohort::server
