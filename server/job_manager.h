#pragma once

// JobManager: runs jobs. It owns the life of every attempt between the job store (the
// truth about jobs) and the agents (the truth about processes); docs/job-protocol.md is its
// contract with the agents, DESIGN.md's "Job lifecycle" its contract with users.
//
// Scheduling. A loop thread runs a pass whenever something may have changed (a submit,
// an exit, a stream opened, a worker lost; Wake()) and at least every `tick`: it fails
// attempts on lost workers, fails STARTING attempts older than `start_timeout`, then
// runs the gang scheduler (server/scheduler.h) over the waiting jobs (QUEUED and
// RESTARTING, by priority then submission) and the free slots of the workers that are
// ALIVE and have an open assignment stream. A slot is busy while a rank placed there
// has not reported its exit (or its worker's lease has not expired), including ranks
// of ended attempts and ranks an agent lists in its heartbeat that the coordinator
// did not place (protocol rule 3; their slot index is unknown, so one free slot of the
// job's device type is counted busy).
//
// Attempts. Placing a job writes STARTING (attempt + 1, the placements) and an
// AttemptStarted event to the store, opens the rendezvous namespace "<job>/<attempt>",
// then queues one START per rank on the workers' assignment queues. RUNNING once every
// rank has sent RankStarted. SUCCEEDED once every rank exited 0 and model.keras is
// stored. A non-zero exit, a lost worker, or a start timeout fails the attempt: a
// coordinator LogLine (rank -1) records why, the namespace is dropped and the workers
// with ranks still running get a STOP. The attempt then settles: once every rank has
// exited or been lost (or `failure_settle` has passed) the job gets restarts + 1 and
// becomes RESTARTING (scheduled again with resume = true and the newest "checkpoints/"
// artifact) or FAILED once restarts > max_restarts (default 3). Its reason names the
// rank, the worker and the message of the root cause: a lost worker outranks a rank
// exit (when a worker dies, its peers' collectives fail first), and exits after the
// STOP are consequences, never the cause.
//
// Every transition is written to the store before anything acts on it (assignments
// are queued after the STARTING write; STOPs after the CANCELLED/RESTARTING write).
// Recover() (before serving) puts jobs a previous coordinator left STARTING, RUNNING or
// RESTARTING back to QUEUED, not counted as restarts; their next attempt resumes.
//
// Assignment streams. ServeAssignments serves one StreamAssignments call: it delivers
// the worker's queue in order, removing an assignment only once written; a new stream
// for the same worker replaces the old one (ABORTED); it ends with NOT_FOUND when the
// lease is lost, UNAVAILABLE at shutdown.
//
// Thread safety: all public methods may be called from any thread. One mutex guards the
// in-memory state; store writes happen under it so that transitions of a job are
// serialized. Lock order: the manager's mutex, then the registry's; the registry's
// listener only queues the worker and takes the manager's small `lost_mu_`.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/worker_service.pb.h"
#include "common/clock.h"
#include "server/artifact_store.h"
#include "server/job_store.h"
#include "server/rendezvous.h"
#include "server/scheduler.h"
#include "server/watch_hub.h"
#include "server/worker_registry.h"

namespace cohort::server {

struct JobManagerOptions {
  absl::Duration start_timeout = absl::Seconds(120);  // --start-timeout
  absl::Duration tick = absl::Seconds(1);
  // How long a failing attempt waits for its other ranks' exits (or their workers'
  // loss) before the job moves on; the coordinator uses lease_ttl + 5s.
  absl::Duration failure_settle = absl::Seconds(15);
  // Called (under the manager's lock) when a job is placed for the first time, with
  // how long it waited since it was submitted: the scheduling latency metric.
  std::function<void(absl::Duration waited)> on_first_placement;
};

class JobManager {
 public:
  // Everything passed must outlive the manager. Installs a listener in `workers`.
  JobManager(JobStore* store, WorkerRegistry* workers, ArtifactStore* artifacts,
             Rendezvous* rendezvous, Clock* clock, JobManagerOptions options);
  ~JobManager();

  // Requeues the jobs a previous coordinator left running (protocol rule 10).
  absl::Status Recover();
  // Starts the loop thread.
  void Start();
  // Ends the loop, every assignment stream (UNAVAILABLE) and every event wait.
  void Stop();
  // Asks for a scheduling pass soon.
  void Wake();
  // One pass, on the caller's thread.
  void RunPass();

  // --- clients ---
  // Slots of `worker` held by ranks that have not reported their exit.
  int32_t BusySlots(const std::string& worker);
  // FAILED_PRECONDITION for a job already final (other than CANCELLED, a no-op).
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id, const std::string& reason);
  // Wakes the watchers of `job_id` (WatchJob streams) after an event of it was stored.
  void NotifyEvents(const std::string& job_id);
  // Where WatchJob streams wait for their job's events; closed by Stop().
  WatchHub& watch_hub() { return watch_hub_; }
  bool stopping();

  // --- agents ---
  absl::Status ServeAssignments(const std::string& lease_id,
                                const std::function<bool(const v1::Assignment&)>& write,
                                const std::function<bool()>& cancelled);
  void OnHeartbeat(const std::string& worker, const std::vector<v1::RankRef>& running);
  // Bad or stale events are dropped (an agent's stream is not ended for them).
  void OnEvent(const v1::RankEvent& event);
  absl::Status OnExit(const v1::ReportExitRequest& request);
  // OK when `rank` may upload the job artifact `name`: rank 0 of the job's live attempt
  // uploads anything; the observability files tell how an attempt went, so they are
  // also taken after it ended (failed, cancelled) as long as it is the job's latest:
  // rank 0's "tensorboard/..." and each rank's own "trace/rank-<rank>.json" (no other
  // rank's). PERMISSION_DENIED for a rank uploading what it may not, FAILED_PRECONDITION
  // for an attempt that is neither live nor the latest.
  absl::Status CheckUploader(const v1::RankRef& rank, const std::string& name);
  // Records an uploaded job artifact (replacing one of the same name), after the same
  // check and after `publish` (moving the received file into place) succeeds, all
  // under one lock: a refused upload replaces no file.
  absl::Status AddArtifact(const v1::RankRef& rank, const v1::ArtifactInfo& info,
                           const std::function<absl::Status()>& publish);

 private:
  struct Rank {
    int32_t rank = 0;
    std::string worker;
    int32_t slot = 0;
    bool started = false;
    bool exited = false;
  };
  struct Attempt {
    int32_t number = 0;
    std::vector<Rank> ranks;
    absl::Time since;
    SlotKind kind = SlotKind::kCpu;
    bool failing = false;  // stopped; waiting for the other ranks to end
    std::string reason;    // the root cause so far
    int cause = 0;         // its rank: 1 an exit or a timeout, 2 a lost worker
    absl::Time failing_since;
  };
  struct Held {
    std::string job_id;
    int32_t attempt = 0;
    int32_t rank = 0;
    SlotKind kind = SlotKind::kCpu;
    int32_t slot = -1;  // -1: unknown (listed by a heartbeat)
  };
  struct Outbox {
    std::deque<std::pair<uint64_t, v1::Assignment>> queue;
    uint64_t stream = 0;  // the serving stream's id; 0: none open
  };

  void Loop();
  void HandleLost(const std::string& worker, v1::WorkerState state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckStartTimeouts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Schedule() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<WorkerCapacity> FreeCapacity() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartAttempt(const JobPlacement& placement, SlotKind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts (or, with a weightier cause, re-explains) an attempt's failure.
  void BeginFailure(const std::string& job_id, const std::string& reason, int cause)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a failing attempt once it has settled (or `force`).
  void SettleFailure(const std::string& job_id, bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailAttempt(const std::string& job_id, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Succeed(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // STOP to every worker with a rank of the attempt that has not exited.
  void StopAttempt(const std::string& job_id, const Attempt& attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Push(const std::string& worker, v1::Assignment assignment) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushStop(const std::string& worker, const std::string& job_id, int32_t attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsCurrent(const std::string& job_id, int32_t attempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckUploaderLocked(const v1::RankRef& rank, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<v1::DataArtifact> DataArtifacts(const v1::JobSpec& spec);

  JobStore* const store_;
  WorkerRegistry* const workers_;
  ArtifactStore* const artifacts_;
  Rendezvous* const rendezvous_;
  Clock* const clock_;
  const JobManagerOptions options_;

  absl::Mutex mu_;
  absl::CondVar outbox_changed_;
  std::map<std::string, Attempt> attempts_ ABSL_GUARDED_BY(mu_);    // live, by job id
  std::map<std::string, std::vector<Held>> held_ ABSL_GUARDED_BY(mu_);  // by worker
  std::map<std::string, Outbox> outboxes_ ABSL_GUARDED_BY(mu_);     // by worker
  std::map<std::string, absl::Time> stop_sent_ ABSL_GUARDED_BY(mu_);  // "worker job/attempt"
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex lost_mu_;
  std::vector<std::pair<std::string, v1::WorkerState>> lost_ ABSL_GUARDED_BY(lost_mu_);

  absl::Mutex wake_mu_;
  bool wake_ ABSL_GUARDED_BY(wake_mu_) = false;
  bool loop_stop_ ABSL_GUARDED_BY(wake_mu_) = false;

  WatchHub watch_hub_;

  std::thread loop_;
};

}  // namespace cohort::server
