#pragma once

// RankRunner: the life of one rank of one attempt on this worker, on a thread of its
// own (which is also the trainer process's parent, see rank_process.h):
//
//   1. prepare: check the START, fetch its data artifacts into the cache, write the
//      attempt's job.yaml, and for rank 0 of a resumed attempt download the checkpoint
//      artifact into <out>/checkpoints/ (unless already there);
//   2. launch `cohort-worker train ...` (trainer_launch.h) and forward its events and
//      log lines (event_translation.h) to the EventSink; rank 0 uploads each
//      checkpoint it announces as "checkpoints/<file name>", and its TensorBoard files
//      after the first epoch and then after an epoch at most every 10 s
//      (tensorboard_upload.h);
//   3. when it ends: rank 0 after exit 0 uploads model.keras and history.json; whatever
//      the outcome, rank 0 uploads its TensorBoard files and, for a job with
//      spec.trace, every rank its step timeline <out>/trace/rank-<r>.json as
//      "trace/rank-<r>.json" (a trace of a failed or cancelled job is the point; the
//      file of an earlier attempt is removed before the trainer starts). Then the
//      exit is reported with ReportExit, retried with backoff until the coordinator
//      acknowledges it, answers an error that retrying cannot fix, or (while the agent
//      shuts down) `shutdown_report_timeout` has passed.
//
// A rank that never got to run reports an exit all the same, so the coordinator frees
// its slot: exit_code 1 with the reason when preparing failed (e.g. "data artifact
// 'ab12.npy': sha256 mismatch"), exit_code -1 / SIGTERM when a STOP came first. An
// upload of model.keras that fails turns a 0 exit into exit_code 1 with the reason.
//
// Stop(): cancels preparing, or SIGTERM to the trainer and SIGKILL after stop_grace.
// Thread-safe; the destructor stops the rank (no grace), gives a failing exit report
// one more try, and joins the thread.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "cohort/v1/worker_service.grpc.pb.h"
#include "worker/agent/agent_metrics.h"
#include "worker/agent/artifact_transfer.h"
#include "worker/agent/call_canceller.h"
#include "worker/agent/event_forwarder.h"
#include "worker/agent/rank_process.h"
#include "worker/agent/trainer_launch.h"

namespace cohort::agent {

// What every runner of an agent shares; not owned, outlives the runners.
struct RunnerContext {
  v1::WorkerService::StubInterface* worker = nullptr;
  v1::JobService::StubInterface* jobs = nullptr;
  DataCache* cache = nullptr;
  EventSink* events = nullptr;
  std::string work_dir;
  LaunchSettings launch;
  absl::Duration stop_grace = absl::Seconds(10);
  absl::Duration rpc_timeout = absl::Seconds(5);
  TransferOptions transfer;
  // Notified when the agent shuts down: exits are then reported for a bounded time.
  absl::Notification* shutdown = nullptr;
  absl::Duration shutdown_report_timeout = absl::Seconds(10);
  // --metrics-listen: the ranks' step statistics; null when off.
  AgentMetrics* metrics = nullptr;
};

class RankRunner {
 public:
  // Starts the rank's thread.
  RankRunner(const RunnerContext& context, v1::Assignment assignment);
  ~RankRunner();
  RankRunner(const RankRunner&) = delete;
  RankRunner& operator=(const RankRunner&) = delete;

  const v1::RankRef& rank() const { return assignment_.rank(); }

  // Stops the rank (idempotent): see the header comment.
  void Stop();
  // True while the rank holds its slot on this host: preparing, or its trainer alive
  // (stopping included). What Heartbeat.running lists.
  bool Active();
  // True once the thread is done (exit reported or given up).
  bool Done();
  // Waits until Done(); false on timeout.
  bool WaitDone(absl::Duration timeout);

 private:
  void Run();
  absl::Status Prepare(const RankPaths& paths);
  // Launches and waits for the trainer; returns its exit (or an error to report).
  absl::StatusOr<ProcessExit> LaunchAndWait(const RankPaths& paths);
  // Uploads the checkpoints the trainer announced; only regular files inside
  // out_dir/checkpoints (symlinks resolved) are sent, whatever a stdout line names.
  void UploadPendingCheckpoints(const RankPaths& paths);
  // Rank 0's TensorBoard files that changed since they were last sent.
  void UploadTensorBoardFiles(const RankPaths& paths);
  void UploadTrace(const RankPaths& paths);
  // A warning for the job's owner: the agent's log and a WARNING log event of the job
  // (what `cohort status` and WatchJob show).
  void Warn(const std::string& text);
  // Uploads `file` as the job artifact `name`; a failure is a Warn.
  void UploadOrWarn(const std::string& name, const std::string& file);
  void ReportExit(int code, int signal, const std::string& message);
  void OnStdout(absl::string_view line);
  void OnStderr(absl::string_view line);

  const RunnerContext context_;
  const v1::Assignment assignment_;
  CallCanceller canceller_;
  absl::Mutex mu_;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool active_ ABSL_GUARDED_BY(mu_) = true;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool exited_ ABSL_GUARDED_BY(mu_) = false;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;  // the destructor runs
  std::unique_ptr<RankProcess> process_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> checkpoints_ ABSL_GUARDED_BY(mu_);  // files to upload
  bool epoch_ended_ ABSL_GUARDED_BY(mu_) = false;  // rank 0: TensorBoard files to upload
  std::map<std::string, int64_t> tensorboard_sent_;  // the rank's thread only
  absl::Time tensorboard_uploaded_ = absl::InfinitePast();  // the rank's thread only
  std::string error_message_ ABSL_GUARDED_BY(mu_);  // the trainer's "error" event
  std::string last_log_ ABSL_GUARDED_BY(mu_);       // its last stderr line
  std::thread thread_;
};

}  // namespace cohort::agent
