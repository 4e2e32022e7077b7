#pragma once

// JobStore: the coordinator's persistent job queue and event log, in SQLite.
//
// Contract (the lifecycle is DESIGN.md's "Job lifecycle"; the types are
// proto/cohort/v1/types.proto):
// - All state lives in the database (tables `jobs` and `job_events`, schema version 2);
//   nothing is cached, so a restarted coordinator finds every job and event. Every
//   mutation is one transaction, committed before the call returns.
// - Insert stores a new job QUEUED with a fresh unique id ("job-" + 12 hex digits), its
//   creation time, a submission sequence (FIFO order among equal priorities) and event 1
//   (state_change UNSPECIFIED -> QUEUED). A non-empty idempotency key already used by the
//   same owner returns the job it created instead, storing nothing. The spec must not
//   carry model bytes (keras_file or inline config_json): the caller stores those
//   elsewhere and strips them; a spec that carries them is INVALID_ARGUMENT.
// - Transition moves a job along the lifecycle:
//     QUEUED -> STARTING;  STARTING -> RUNNING;  STARTING | RUNNING -> RESTARTING;
//     RESTARTING -> STARTING;  RUNNING -> SUCCEEDED | FAILED;
//     STARTING | RESTARTING -> FAILED;  any non-final state -> CANCELLED;
//     STARTING | RUNNING | RESTARTING -> QUEUED (requeue after a coordinator restart).
//   Anything else (including leaving a final state, and X -> X) is FAILED_PRECONDITION
//   naming both states, and changes nothing. `edit` (may be null) then adjusts the job
//   (attempt, placements, restarts, artifacts, ...); it runs under the store's lock and
//   must not call the store. Its changes to id, spec, owner, state, created_at and
//   last_sequence are undone. started_at is set on the first STARTING, finished_at on
//   entering a final state; reason is replaced by `reason`. The row and the state_change
//   event are written in one transaction; the updated job is returned.
// - AppendEvent stores a non-state-change event with the job's next sequence number
//   (strictly increasing from 1 per job), the current time, and the job's attempt when
//   the event carries none; an EpochEnd also becomes job.last_epoch. Job.last_sequence
//   always names the latest event. A state_change event is INVALID_ARGUMENT (use
//   Transition); a job in a final state takes no more events (FAILED_PRECONDITION), so
//   the event that made it final is always its last.
// - Errors: NOT_FOUND "job 'x' not found" for an unknown id; INTERNAL naming the job for
//   stored bytes that do not parse (never a crash); database errors as Database reports
//   them (FAILED_PRECONDITION for a full disk or read-only file, INTERNAL otherwise).
//
// - Update adjusts a job without a state change (artifacts, restarts, ...): `edit` as
//   for Transition, with state and reason undone too; no event is written. A job in a
//   final state is FAILED_PRECONDITION, unless `if_final` is kUpdate (the traces and
//   curves its ranks hand in after it was cancelled or failed).
//
// Thread safety: all methods may be called from any thread. One mutex serializes them,
// so a multi-statement transaction never interleaves with another of this store. The
// Database connection should be the store's own (the coordinator opens a second
// connection for it): statements other components ran on a shared connection while a
// transaction of this store is open would become part of that transaction.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cohort/v1/job_service.pb.h"
#include "cohort/v1/types.pb.h"
#include "common/clock.h"
#include "server/database.h"
#include "server/scheduler.h"

namespace cohort::server {

class JobStore {
 public:
  // Checks that `db` holds the job tables; loads nothing. `db` and `clock` must outlive
  // the store.
  static absl::StatusOr<std::unique_ptr<JobStore>> Create(Database* db, Clock* clock);

  absl::StatusOr<v1::Job> Insert(const v1::JobSpec& spec, const std::string& idempotency_key,
                                 const std::string& owner);

  absl::StatusOr<v1::Job> Get(const std::string& id);

  // Jobs in `states` (all when empty), newest first. `page_size` <= 0 means 100 (at most
  // 1000). `page_token` is empty or a next_page_token of an earlier call (with the same
  // states); a malformed one is INVALID_ARGUMENT. next_page_token is empty on the last
  // page. A non-empty `owner` lists only that owner's jobs.
  absl::StatusOr<v1::ListJobsResponse> List(const std::vector<v1::JobState>& states,
                                            int32_t page_size, const std::string& page_token,
                                            const std::string& owner = "");

  // The QUEUED jobs in schedule order: priority descending, then submission sequence.
  absl::StatusOr<std::vector<QueuedJob>> Queued();
  // The jobs waiting for slots, QUEUED and RESTARTING, in the same order: the first
  // `max_cpu` that run on CPU slots and the first `max_gpu` that run on GPUs. The
  // scheduler asks for no more than it has free slots of each kind (a job takes at least
  // one), so a pass reads a few rows however long the queue is.
  absl::StatusOr<std::vector<QueuedJob>> Waiting(int64_t max_cpu = INT64_MAX,
                                                 int64_t max_gpu = INT64_MAX);

  enum class IfFinal { kRefuse, kUpdate };
  absl::StatusOr<v1::Job> Update(const std::string& id, const std::function<void(v1::Job&)>& edit,
                                 IfFinal if_final = IfFinal::kRefuse);

  absl::StatusOr<v1::Job> Transition(const std::string& id, v1::JobState to,
                                     const std::string& reason,
                                     const std::function<void(v1::Job&)>& edit = nullptr);

  // Returns the event as stored (with its sequence, time and attempt).
  absl::StatusOr<v1::JobEvent> AppendEvent(const std::string& id, v1::JobEvent event);

  // The stored events of job `id` with sequence > `after_sequence`, in order; at most
  // `limit` of them (all when `limit` <= 0).
  absl::StatusOr<std::vector<v1::JobEvent>> Events(const std::string& id, int64_t after_sequence,
                                                   int32_t limit = 0);

  // Jobs not in a final state (QUEUED, STARTING, RUNNING, RESTARTING); a non-empty
  // `owner` counts only that owner's.
  absl::StatusOr<int64_t> CountActive(const std::string& owner = "");

  // Jobs in STARTING, RUNNING or RESTARTING, in submission order (recovery after a
  // coordinator restart).
  absl::StatusOr<std::vector<v1::Job>> Unfinished();

  // "QUEUED" for JOB_STATE_QUEUED (the number, for a value the enum lacks).
  static std::string StateName(v1::JobState state);
  // True for SUCCEEDED, FAILED and CANCELLED.
  static bool IsFinal(v1::JobState state);
  // Whether the lifecycle allows `from` -> `to`.
  static bool IsLegal(v1::JobState from, v1::JobState to);

 private:
  JobStore(Database* db, Clock* clock) : db_(db), clock_(clock) {}

  absl::StatusOr<v1::Job> GetLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::string> FindByKey(const std::string& owner, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteJob(const v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteEvent(const v1::JobEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Jobs in `states` in schedule order; `where` (SQL, may be empty) narrows them, and at
  // most `limit` are read.
  absl::StatusOr<std::vector<QueuedJob>> InStates(const std::vector<v1::JobState>& states,
                                                  const std::string& where = "",
                                                  int64_t limit = -1);

  Database* const db_;
  Clock* const clock_;
  absl::Mutex mu_;
};

}  // namespace cohort::server
