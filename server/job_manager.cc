// JobManager: the loop, scheduling, attempts and their ends. The agent-facing calls
// are in job_manager_agents.cc.

#include "server/job_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "common/logging.h"
#include "proto/time_convert.h"

namespace cohort::server {

JobManager::JobManager(JobStore* store, WorkerRegistry* workers, ArtifactStore* artifacts,
                       Rendezvous* rendezvous, Clock* clock, JobManagerOptions options)
    : store_(store),
      workers_(workers),
      artifacts_(artifacts),
      rendezvous_(rendezvous),
      clock_(clock),
      options_(options) {
  workers_->SetListener([this](const std::string& name, v1::WorkerState state) {
    {
      absl::MutexLock lock(&lost_mu_);
      lost_.emplace_back(name, state);
    }
    Wake();
  });
}

JobManager::~JobManager() {
  Stop();
  workers_->SetListener(nullptr);
}

absl::Status JobManager::Recover() {
  absl::StatusOr<std::vector<v1::Job>> jobs = store_->Unfinished();
  if (!jobs.ok()) return jobs.status();
  for (const v1::Job& job : *jobs) {
    absl::StatusOr<v1::Job> requeued = store_->Transition(
        job.id(), v1::JOB_STATE_QUEUED,
        absl::StrCat("requeued after a coordinator restart (attempt ", job.attempt(), " ended)"),
        [](v1::Job& j) { j.clear_placements(); });
    if (!requeued.ok()) return requeued.status();
    spdlog::info("job {} requeued after a coordinator restart", job.id());
  }
  return absl::OkStatus();
}

void JobManager::Start() {
  loop_ = std::thread([this] { Loop(); });
}

void JobManager::Stop() {
  {
    absl::MutexLock lock(&wake_mu_);
    loop_stop_ = true;
  }
  if (loop_.joinable()) loop_.join();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    outbox_changed_.SignalAll();
  }
  watch_hub_.Close();
}

bool JobManager::stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void JobManager::Wake() {
  absl::MutexLock lock(&wake_mu_);
  wake_ = true;
}

void JobManager::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&wake_mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(wake_mu_) { return wake_ || loop_stop_; };
      wake_mu_.AwaitWithTimeout(absl::Condition(&ready), options_.tick);
      if (loop_stop_) return;
      wake_ = false;
    }
    RunPass();
  }
}

void JobManager::RunPass() {
  std::vector<std::pair<std::string, v1::WorkerState>> lost;
  {
    absl::MutexLock lock(&lost_mu_);
    lost.swap(lost_);
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [name, state] : lost) HandleLost(name, state);
  CheckStartTimeouts();
  Schedule();
}

void JobManager::NotifyEvents(const std::string& job_id) { watch_hub_.Notify(job_id); }

int32_t JobManager::BusySlots(const std::string& worker) {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(worker);
  return it == held_.end() ? 0 : static_cast<int32_t>(it->second.size());
}

bool JobManager::IsCurrent(const std::string& job_id, int32_t attempt) {
  auto it = attempts_.find(job_id);
  return it != attempts_.end() && it->second.number == attempt;
}

void JobManager::HandleLost(const std::string& worker, v1::WorkerState state) {
  auto box = outboxes_.find(worker);
  if (box != outboxes_.end()) {
    outboxes_.erase(box);
    outbox_changed_.SignalAll();
  }
  held_.erase(worker);
  const char* why = state == v1::WORKER_STATE_LEFT ? "the worker left"
                                                   : "no heartbeat within the lease";
  std::vector<std::pair<std::string, std::string>> failed;
  for (auto& [job_id, attempt] : attempts_) {
    for (Rank& r : attempt.ranks) {
      if (r.worker != worker || r.exited) continue;
      r.exited = true;  // its process is gone with the worker
      if (failed.empty() || failed.back().first != job_id) {
        failed.emplace_back(job_id, absl::StrCat("rank ", r.rank, " on worker '", worker,
                                                 "' was lost: ", why));
      }
    }
  }
  for (const auto& [job_id, reason] : failed) BeginFailure(job_id, reason, 2);
}

void JobManager::CheckStartTimeouts() {
  absl::Time now = clock_->Now();
  std::vector<std::pair<std::string, std::string>> late;
  std::vector<std::string> settling;
  for (const auto& [job_id, attempt] : attempts_) {
    if (attempt.failing) {
      settling.push_back(job_id);
      continue;
    }
    bool all = true;
    std::vector<std::string> missing;
    for (const Rank& r : attempt.ranks) {
      if (!r.started) {
        all = false;
        missing.push_back(absl::StrCat(r.rank, " (worker '", r.worker, "')"));
      }
    }
    if (all || now - attempt.since < options_.start_timeout) continue;
    late.emplace_back(job_id, absl::StrCat("attempt ", attempt.number, " did not start within ",
                                           absl::FormatDuration(options_.start_timeout),
                                           ": ranks not started: ", absl::StrJoin(missing, ", ")));
  }
  for (const auto& [job_id, reason] : late) BeginFailure(job_id, reason, 1);
  for (const std::string& job_id : settling) SettleFailure(job_id, false);
}

std::vector<WorkerCapacity> JobManager::FreeCapacity() {
  std::vector<WorkerCapacity> out;
  for (const v1::WorkerInfo& w : workers_->List({v1::WORKER_STATE_ALIVE})) {
    auto box = outboxes_.find(w.name());
    if (box == outboxes_.end() || box->second.stream == 0) continue;  // rule 2
    WorkerCapacity c;
    c.name = w.name();
    c.total_cpu_slots = w.resources().cpu_slots();
    c.total_gpus = w.resources().gpus_size();
    std::set<int32_t> busy_cpu, busy_gpu;
    int unknown_cpu = 0, unknown_gpu = 0;
    for (const Held& h : held_[w.name()]) {
      bool gpu = h.kind == SlotKind::kGpu;
      if (h.slot < 0) {
        ++(gpu ? unknown_gpu : unknown_cpu);
      } else {
        (gpu ? busy_gpu : busy_cpu).insert(h.slot);
      }
    }
    for (int32_t s = 0; s < c.total_cpu_slots; ++s) {
      if (!busy_cpu.count(s)) c.free_cpu_slots.push_back(s);
    }
    for (const v1::GpuInfo& g : w.resources().gpus()) {
      if (!busy_gpu.count(g.index())) c.free_gpus.push_back(g.index());
    }
    // Ranks whose slot is unknown take the last free ones.
    for (; unknown_cpu > 0 && !c.free_cpu_slots.empty(); --unknown_cpu) c.free_cpu_slots.pop_back();
    for (; unknown_gpu > 0 && !c.free_gpus.empty(); --unknown_gpu) c.free_gpus.pop_back();
    out.push_back(std::move(c));
  }
  return out;
}

void JobManager::Schedule() {
  if (stopping_) return;
  std::vector<WorkerCapacity> free = FreeCapacity();
  int64_t free_cpu = 0, free_gpu = 0;
  for (const WorkerCapacity& w : free) {
    free_cpu += static_cast<int64_t>(w.free_cpu_slots.size());
    free_gpu += static_cast<int64_t>(w.free_gpus.size());
  }
  if (free_cpu == 0 && free_gpu == 0) return;  // a full cluster places nothing: no read
  // No more jobs of a kind than free slots of it can be placed (each takes one or more).
  absl::StatusOr<std::vector<QueuedJob>> waiting = store_->Waiting(free_cpu, free_gpu);
  if (!waiting.ok()) {
    spdlog::error("scheduler: cannot read the queue: {}", waiting.status());
    return;
  }
  if (waiting->empty()) return;
  std::map<std::string, SlotKind> kinds;
  for (const QueuedJob& q : *waiting) kinds[q.id] = q.kind;
  for (const JobPlacement& p : server::Schedule(*std::move(waiting), std::move(free))) {
    StartAttempt(p, kinds[p.job_id]);
  }
}

std::vector<v1::DataArtifact> JobManager::DataArtifacts(const v1::JobSpec& spec) {
  std::vector<std::string> ids;
  if (spec.model_case() == v1::JobSpec::kModelArtifactId) ids.push_back(spec.model_artifact_id());
  for (const v1::ArrayRef* a : {&spec.data().x(), &spec.data().y(), &spec.data().validation_x(),
                                &spec.data().validation_y()}) {
    if (a->source_case() == v1::ArrayRef::kArtifactId) ids.push_back(a->artifact_id());
  }
  std::vector<v1::DataArtifact> out;
  std::set<std::string> seen;
  for (const std::string& id : ids) {
    if (!seen.insert(id).second) continue;
    absl::StatusOr<v1::DataArtifact> d = artifacts_->DescribeUpload(id);
    if (!d.ok()) {
      spdlog::error("job artifact {} is missing: {}", id, d.status());
      continue;
    }
    out.push_back(*std::move(d));
  }
  return out;
}

namespace {

// The newest of the job's checkpoints whose stored bytes are still those received (size
// and SHA-256, ArtifactStore::VerifyJobArtifact); "" when none is. The newer, damaged
// ones are added to `damaged` (and logged): resuming from them would fail in the trainer,
// which would then start over, while an older good one loses only an epoch or two.
// Hashing under the manager's lock costs a read of the checkpoint per attempt, which
// is small beside starting the attempt's trainers.
std::string ResumeCheckpoint(const ArtifactStore& artifacts, const v1::Job& job,
                             std::vector<std::string>* damaged) {
  std::vector<const v1::ArtifactInfo*> checkpoints;
  for (const v1::ArtifactInfo& a : job.artifacts()) {
    if (absl::StartsWith(a.name(), "checkpoints/")) checkpoints.push_back(&a);
  }
  std::sort(checkpoints.begin(), checkpoints.end(),
            [](const auto* a, const auto* b) { return a->name() > b->name(); });
  for (const v1::ArtifactInfo* c : checkpoints) {
    absl::Status verified = artifacts.VerifyJobArtifact(job.id(), *c);
    if (verified.ok()) return c->name();
    ScopedJobLogFields log_fields({job.id(), job.attempt() + 1, -1});
    spdlog::warn("job {}: not resuming from {}: {}", job.id(), c->name(), verified.message());
    damaged->push_back(c->name());
  }
  return "";
}

}  // namespace

void JobManager::StartAttempt(const JobPlacement& placement, SlotKind kind) {
  const std::string& id = placement.job_id;
  absl::StatusOr<v1::Job> job = store_->Get(id);
  if (!job.ok()) {
    spdlog::error("scheduler: {}", job.status());
    return;
  }
  const int32_t number = job->attempt() + 1;
  std::vector<std::string> damaged;
  const std::string checkpoint = ResumeCheckpoint(*artifacts_, *job, &damaged);
  v1::AttemptStarted started;
  started.set_attempt(number);
  for (const RankPlacement& r : placement.ranks) {
    v1::Placement* p = started.add_placements();
    p->set_rank(r.rank);
    p->set_worker(r.worker);
    p->set_slot(r.slot);
  }
  absl::StatusOr<v1::Job> starting =
      store_->Transition(id, v1::JOB_STATE_STARTING, "", [&](v1::Job& j) {
        j.set_attempt(number);
        *j.mutable_placements() = started.placements();
        auto* list = j.mutable_artifacts();
        for (int i = list->size() - 1; i >= 0; --i) {
          if (absl::c_linear_search(damaged, list->Get(i).name())) list->DeleteSubrange(i, 1);
        }
      });
  if (!starting.ok()) {
    spdlog::error("scheduler: cannot start job {}: {}", id, starting.status());
    return;
  }
  v1::JobEvent event;
  event.set_attempt(number);
  *event.mutable_attempt_started() = started;
  if (auto e = store_->AppendEvent(id, event); !e.ok()) {
    spdlog::warn("job {}: cannot record the attempt's placements: {}", id, e.status());
  }
  for (const std::string& name : damaged) {
    if (absl::StatusOr<std::string> path = artifacts_->JobArtifactPath(id, name); path.ok()) {
      std::remove(path->c_str());
    }
    v1::JobEvent warning;
    warning.set_attempt(number);
    warning.mutable_log()->set_rank(-1);
    warning.mutable_log()->set_level(v1::LOG_LEVEL_WARNING);
    warning.mutable_log()->set_text(absl::StrCat(
        "dropped the damaged checkpoint '", name, "'; attempt ", number, " resumes from ",
        checkpoint.empty() ? "the beginning" : absl::StrCat("'", checkpoint, "'")));
    if (auto e = store_->AppendEvent(id, warning); !e.ok()) {
      spdlog::warn("job {}: cannot record a dropped checkpoint: {}", id, e.status());
    }
  }
  NotifyEvents(id);
  if (number == 1 && options_.on_first_placement) {
    options_.on_first_placement(clock_->Now() - FromProto(starting->created_at()));
  }

  const std::string ns = Rendezvous::Namespace(id, number);
  rendezvous_->Open(ns);
  Attempt attempt;
  attempt.number = number;
  attempt.since = clock_->Now();
  attempt.kind = kind;
  std::vector<v1::DataArtifact> data = DataArtifacts(starting->spec());
  for (const RankPlacement& r : placement.ranks) {
    attempt.ranks.push_back(Rank{r.rank, r.worker, r.slot});
    held_[r.worker].push_back(Held{id, number, r.rank, kind, r.slot});
    v1::Assignment a;
    a.set_action(v1::ASSIGNMENT_ACTION_START);
    a.mutable_rank()->set_job_id(id);
    a.mutable_rank()->set_attempt(number);
    a.mutable_rank()->set_rank(r.rank);
    a.set_world_size(static_cast<int32_t>(placement.ranks.size()));
    *a.mutable_spec() = starting->spec();
    a.set_slot(r.slot);
    a.set_rendezvous_namespace(ns);
    a.set_resume(number > 1);
    a.set_checkpoint_artifact(checkpoint);
    for (const v1::DataArtifact& d : data) *a.add_data_artifacts() = d;
    Push(r.worker, std::move(a));
  }
  std::sort(attempt.ranks.begin(), attempt.ranks.end(),
            [](const Rank& a, const Rank& b) { return a.rank < b.rank; });
  attempts_[id] = std::move(attempt);
  ScopedJobLogFields log_fields({id, number, -1});
  spdlog::info("job {} attempt {} starting on {} ranks", id, number, placement.ranks.size());
}

void JobManager::StopAttempt(const std::string& job_id, const Attempt& attempt) {
  std::set<std::string> workers;
  for (const Rank& r : attempt.ranks) {
    if (!r.exited) workers.insert(r.worker);
  }
  for (const std::string& w : workers) PushStop(w, job_id, attempt.number);
}

void JobManager::BeginFailure(const std::string& job_id, const std::string& reason, int cause) {
  auto it = attempts_.find(job_id);
  if (it == attempts_.end()) return;
  Attempt& attempt = it->second;
  if (attempt.failing) {
    if (cause > attempt.cause) {
      attempt.reason = reason;
      attempt.cause = cause;
    }
    SettleFailure(job_id, false);
    return;
  }
  attempt.failing = true;
  attempt.reason = reason;
  attempt.cause = cause;
  attempt.failing_since = clock_->Now();
  // Recorded before anything acts on it.
  v1::JobEvent event;
  event.set_attempt(attempt.number);
  event.mutable_log()->set_rank(-1);
  event.mutable_log()->set_level(v1::LOG_LEVEL_WARNING);
  event.mutable_log()->set_text(absl::StrCat("attempt ", attempt.number, " failed: ", reason,
                                             "; stopping its ranks"));
  if (auto e = store_->AppendEvent(job_id, event); !e.ok()) {
    spdlog::warn("job {}: {}", job_id, e.status());
  }
  NotifyEvents(job_id);
  rendezvous_->Drop(Rendezvous::Namespace(job_id, attempt.number));
  StopAttempt(job_id, attempt);
  SettleFailure(job_id, false);
}

void JobManager::SettleFailure(const std::string& job_id, bool force) {
  auto it = attempts_.find(job_id);
  if (it == attempts_.end() || !it->second.failing) return;
  const Attempt& attempt = it->second;
  bool all = std::all_of(attempt.ranks.begin(), attempt.ranks.end(),
                         [](const Rank& r) { return r.exited; });
  if (!all && !force && clock_->Now() - attempt.failing_since < options_.failure_settle) return;
  const std::string reason = attempt.reason;  // FailAttempt ends `attempt`
  FailAttempt(job_id, reason);
}

void JobManager::FailAttempt(const std::string& job_id, const std::string& reason) {
  auto it = attempts_.find(job_id);
  if (it == attempts_.end()) return;
  Attempt attempt = std::move(it->second);
  attempts_.erase(it);
  rendezvous_->Drop(Rendezvous::Namespace(job_id, attempt.number));
  absl::StatusOr<v1::Job> job = store_->Get(job_id);
  if (!job.ok()) {
    spdlog::error("job {}: {}", job_id, job.status());
    return;
  }
  const int32_t restarts = job->restarts() + 1;
  const int32_t max = job->spec().has_max_restarts() ? job->spec().max_restarts() : 3;
  const v1::JobState to = restarts > max ? v1::JOB_STATE_FAILED : v1::JOB_STATE_RESTARTING;
  absl::StatusOr<v1::Job> after =
      store_->Transition(job_id, to, reason, [&](v1::Job& j) { j.set_restarts(restarts); });
  if (!after.ok()) spdlog::error("job {}: {}", job_id, after.status());
  if (!attempt.failing) StopAttempt(job_id, attempt);  // else sent when it began failing
  ScopedJobLogFields log_fields({job_id, attempt.number, -1});
  spdlog::warn("job {} attempt {} failed ({}): {}", job_id, attempt.number,
               to == v1::JOB_STATE_FAILED ? "job FAILED" : "restarting", reason);
  NotifyEvents(job_id);
  Wake();
}

void JobManager::Succeed(const std::string& job_id) {
  auto it = attempts_.find(job_id);
  if (it == attempts_.end()) return;
  const int32_t number = it->second.number;
  attempts_.erase(it);
  rendezvous_->Drop(Rendezvous::Namespace(job_id, number));
  absl::StatusOr<v1::Job> job = store_->Get(job_id);
  if (job.ok() && job->state() == v1::JOB_STATE_STARTING) {
    job = store_->Transition(job_id, v1::JOB_STATE_RUNNING, "");
  }
  if (job.ok()) job = store_->Transition(job_id, v1::JOB_STATE_SUCCEEDED, "");
  if (!job.ok()) spdlog::error("job {}: {}", job_id, job.status());
  ScopedJobLogFields log_fields({job_id, number, -1});
  spdlog::info("job {} succeeded (attempt {})", job_id, number);
  NotifyEvents(job_id);
  Wake();
}

absl::StatusOr<v1::Job> JobManager::Cancel(const std::string& job_id, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<v1::Job> job = store_->Get(job_id);
  if (!job.ok()) return job.status();
  if (job->state() == v1::JOB_STATE_CANCELLED) return job;
  if (JobStore::IsFinal(job->state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", job_id, "' has already ended (", JobStore::StateName(job->state()),
        ") and cannot be cancelled"));
  }
  absl::StatusOr<v1::Job> cancelled = store_->Transition(
      job_id, v1::JOB_STATE_CANCELLED, reason.empty() ? "cancelled" : reason);
  if (!cancelled.ok()) return cancelled.status();
  auto it = attempts_.find(job_id);
  if (it != attempts_.end()) {
    rendezvous_->Drop(Rendezvous::Namespace(job_id, it->second.number));
    StopAttempt(job_id, it->second);
    attempts_.erase(it);
  }
  NotifyEvents(job_id);
  Wake();
  return cancelled;
}

}  // namespace cohort::server
