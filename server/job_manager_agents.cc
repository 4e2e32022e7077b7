// JobManager: what agents call (assignment streams, heartbeats, events, exits,
// artifact uploads). See job_manager.h.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "server/job_manager.h"

namespace cohort::server {
namespace {

constexpr size_t kMaxLogLine = 16 << 10;
// A rank an agent keeps listing after its STOP gets the STOP again this often.
constexpr absl::Duration kStopRepeat = absl::Seconds(5);

std::string ExitReason(const v1::ReportExitRequest& r, const std::string& worker) {
  std::string out = absl::StrCat("rank ", r.rank().rank(), " on worker '", worker, "'");
  if (r.signal() != 0) {
    absl::StrAppend(&out, " was killed by signal ", r.signal());
  } else {
    absl::StrAppend(&out, " exited with code ", r.exit_code());
  }
  if (!r.message().empty()) absl::StrAppend(&out, ": ", r.message().substr(0, kMaxLogLine));
  return out;
}

}  // namespace

void JobManager::Push(const std::string& worker, v1::Assignment assignment) {
  outboxes_[worker].queue.emplace_back(++next_id_, std::move(assignment));
  outbox_changed_.SignalAll();
}

void JobManager::PushStop(const std::string& worker, const std::string& job_id, int32_t attempt) {
  auto box = outboxes_.find(worker);
  if (box == outboxes_.end()) return;  // a lost worker's processes are gone with it
  v1::Assignment stop;
  stop.set_action(v1::ASSIGNMENT_ACTION_STOP);
  stop.mutable_rank()->set_job_id(job_id);
  stop.mutable_rank()->set_attempt(attempt);
  // A START of this attempt still waiting in the queue need not go out at all.
  auto& q = box->second.queue;
  q.erase(std::remove_if(q.begin(), q.end(),
                         [&](const auto& e) {
                           return e.second.action() == v1::ASSIGNMENT_ACTION_START &&
                                  e.second.rank().job_id() == job_id &&
                                  e.second.rank().attempt() == attempt;
                         }),
          q.end());
  stop_sent_[absl::StrCat(worker, " ", job_id, "/", attempt)] = clock_->Now();
  Push(worker, std::move(stop));
}

absl::Status JobManager::ServeAssignments(const std::string& lease_id,
                                          const std::function<bool(const v1::Assignment&)>& write,
                                          const std::function<bool()>& cancelled) {
  absl::StatusOr<std::string> worker = workers_->LeaseOwner(lease_id);
  if (!worker.ok()) return worker.status();
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the coordinator is shutting down");
  const uint64_t me = ++next_id_;
  outboxes_[*worker].stream = me;
  outbox_changed_.SignalAll();
  Wake();  // new capacity
  spdlog::info("worker {} opened its assignment stream", *worker);
  while (true) {
    if (stopping_) return absl::UnavailableError("the coordinator is shutting down");
    auto box = outboxes_.find(*worker);
    if (box == outboxes_.end()) {
      return absl::NotFoundError("the worker's lease was lost: register again");
    }
    if (box->second.stream != me) {
      return absl::AbortedError("another assignment stream of this worker replaced this one");
    }
    if (!box->second.queue.empty()) {
      auto [id, assignment] = box->second.queue.front();
      mu_.Unlock();
      bool ok = write(assignment);
      mu_.Lock();
      box = outboxes_.find(*worker);
      if (!ok) {
        if (box != outboxes_.end() && box->second.stream == me) box->second.stream = 0;
        return absl::CancelledError("the agent went away");
      }
      if (box != outboxes_.end() && !box->second.queue.empty() &&
          box->second.queue.front().first == id) {
        box->second.queue.pop_front();
      }
      continue;
    }
    if (cancelled()) {
      box->second.stream = 0;
      return absl::CancelledError("the agent went away");
    }
    outbox_changed_.WaitWithTimeout(&mu_, absl::Milliseconds(500));
  }
}

void JobManager::OnHeartbeat(const std::string& worker, const std::vector<v1::RankRef>& running) {
  absl::MutexLock lock(&mu_);
  absl::Time now = clock_->Now();
  for (const v1::RankRef& r : running) {
    std::vector<Held>& held = held_[worker];
    bool known = std::any_of(held.begin(), held.end(), [&](const Held& h) {
      return h.job_id == r.job_id() && h.attempt == r.attempt() && h.rank == r.rank();
    });
    if (!known) {
      // A process the coordinator did not place (or forgot, after a restart): its slot
      // is busy until it exits.
      Held h{r.job_id(), r.attempt(), r.rank(), SlotKind::kCpu, -1};
      if (absl::StatusOr<v1::Job> job = store_->Get(r.job_id()); job.ok()) {
        if (job->spec().resources().device() == v1::DEVICE_TYPE_CUDA) h.kind = SlotKind::kGpu;
      }
      held.push_back(std::move(h));
    }
    if (IsCurrent(r.job_id(), r.attempt())) continue;
    std::string key = absl::StrCat(worker, " ", r.job_id(), "/", r.attempt());
    auto sent = stop_sent_.find(key);
    if (sent != stop_sent_.end() && now - sent->second < kStopRepeat) continue;
    PushStop(worker, r.job_id(), r.attempt());
  }
}

void JobManager::OnEvent(const v1::RankEvent& event) {
  const v1::RankRef& r = event.rank();
  v1::JobEvent stored;
  stored.set_attempt(r.attempt());
  {
    absl::MutexLock lock(&mu_);
    if (!IsCurrent(r.job_id(), r.attempt())) return;  // a stale attempt's last words
    Attempt& attempt = attempts_[r.job_id()];
    if (r.rank() < 0 || r.rank() >= static_cast<int32_t>(attempt.ranks.size())) return;
    switch (event.kind_case()) {
      case v1::RankEvent::kStarted: {
        if (attempt.failing) return;
        attempt.ranks[r.rank()].started = true;
        bool all = std::all_of(attempt.ranks.begin(), attempt.ranks.end(),
                               [](const Rank& k) { return k.started; });
        if (!all) return;
        absl::StatusOr<v1::Job> job = store_->Get(r.job_id());
        if (job.ok() && job->state() == v1::JOB_STATE_STARTING) {
          job = store_->Transition(r.job_id(), v1::JOB_STATE_RUNNING, "");
          if (!job.ok()) spdlog::error("job {}: {}", r.job_id(), job.status());
          NotifyEvents(r.job_id());
        }
        return;
      }
      case v1::RankEvent::kStep:
        if (r.rank() != 0) return;  // every rank sees the same all-reduced progress
        *stored.mutable_step() = event.step();
        break;
      case v1::RankEvent::kEpoch:
        if (r.rank() != 0) return;
        *stored.mutable_epoch() = event.epoch();
        break;
      case v1::RankEvent::kLog:
        *stored.mutable_log() = event.log();
        stored.mutable_log()->set_rank(r.rank());
        if (stored.log().text().size() > kMaxLogLine) {
          stored.mutable_log()->mutable_text()->resize(kMaxLogLine);
        }
        break;
      default:
        return;
    }
  }
  // Outside the lock: a job ended meanwhile refuses the event, which is then moot.
  if (store_->AppendEvent(r.job_id(), std::move(stored)).ok()) NotifyEvents(r.job_id());
}

absl::Status JobManager::OnExit(const v1::ReportExitRequest& request) {
  const v1::RankRef& r = request.rank();
  if (r.job_id().empty()) return absl::InvalidArgumentError("rank.job_id: must be set");
  absl::MutexLock lock(&mu_);
  std::string worker;
  for (auto& [name, held] : held_) {
    auto it = std::find_if(held.begin(), held.end(), [&](const Held& h) {
      return h.job_id == r.job_id() && h.attempt == r.attempt() && h.rank == r.rank();
    });
    if (it != held.end()) {
      held.erase(it);
      worker = name;
      break;
    }
  }
  if (worker.empty()) return absl::OkStatus();  // already known, or never placed here
  Wake();  // a slot is free
  if (!IsCurrent(r.job_id(), r.attempt())) return absl::OkStatus();
  Attempt& attempt = attempts_[r.job_id()];
  if (r.rank() < 0 || r.rank() >= static_cast<int32_t>(attempt.ranks.size())) {
    return absl::OkStatus();
  }
  Rank& rank = attempt.ranks[r.rank()];
  if (rank.exited) return absl::OkStatus();
  rank.exited = true;
  if (attempt.failing) {  // an exit after the STOP: a consequence, not a cause
    SettleFailure(r.job_id(), false);
    return absl::OkStatus();
  }
  if (request.exit_code() != 0) {
    BeginFailure(r.job_id(), ExitReason(request, worker), 1);
    return absl::OkStatus();
  }
  bool all = std::all_of(attempt.ranks.begin(), attempt.ranks.end(),
                         [](const Rank& k) { return k.exited; });
  if (!all) return absl::OkStatus();
  absl::StatusOr<v1::Job> job = store_->Get(r.job_id());
  if (!job.ok()) return job.status();
  bool has_model = std::any_of(job->artifacts().begin(), job->artifacts().end(),
                               [](const v1::ArtifactInfo& a) { return a.name() == "model.keras"; });
  if (has_model) {
    Succeed(r.job_id());
  } else {
    BeginFailure(r.job_id(),
                 absl::StrCat("every rank exited with code 0 but rank 0 on worker '",
                              attempt.ranks[0].worker, "' did not upload model.keras"),
                 1);
  }
  return absl::OkStatus();
}

absl::Status JobManager::CheckUploader(const v1::RankRef& rank, const std::string& name) {
  absl::MutexLock lock(&mu_);
  return CheckUploaderLocked(rank, name);
}

absl::Status JobManager::CheckUploaderLocked(const v1::RankRef& rank, const std::string& name) {
  const bool trace = name == absl::StrCat("trace/rank-", rank.rank(), ".json");
  const bool tensorboard = rank.rank() == 0 && absl::StartsWith(name, "tensorboard/");
  if (rank.rank() != 0 && !trace) {
    return absl::PermissionDeniedError(absl::StrCat(
        "rank ", rank.rank(), " may upload only its trace (trace/rank-", rank.rank(),
        ".json), not '", name, "'; rank 0 uploads the job's other artifacts"));
  }
  const bool live = IsCurrent(rank.job_id(), rank.attempt());
  if (live && !trace) return absl::OkStatus();
  const absl::Status not_running = absl::FailedPreconditionError(
      absl::StrCat("attempt ", rank.attempt(), " of job ", rank.job_id(), " is not running"));
  if (!live && !trace && !tensorboard) return not_running;
  if (!live && attempts_.count(rank.job_id()) > 0) return not_running;  // a newer one runs
  absl::StatusOr<v1::Job> job = store_->Get(rank.job_id());
  if (!job.ok()) return job.status();
  if (job->attempt() != rank.attempt()) return not_running;
  const int32_t world = std::max(1, job->spec().resources().workers());
  if (rank.rank() < 0 || rank.rank() >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank.rank(), " is not a rank of job ", rank.job_id()));
  }
  return absl::OkStatus();
}

absl::Status JobManager::AddArtifact(const v1::RankRef& rank, const v1::ArtifactInfo& info,
                                     const std::function<absl::Status()>& publish) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckUploaderLocked(rank, info.name()); !s.ok()) return s;
  if (absl::Status s = publish(); !s.ok()) return s;
  std::vector<std::string> pruned;
  // What CheckUploaderLocked let through for an ended job is its ranks' last word.
  const JobStore::IfFinal if_final = IsCurrent(rank.job_id(), rank.attempt())
                                         ? JobStore::IfFinal::kRefuse
                                         : JobStore::IfFinal::kUpdate;
  absl::StatusOr<v1::Job> job = store_->Update(rank.job_id(), [&](v1::Job& j) {
    auto* list = j.mutable_artifacts();
    bool replaced = false;
    for (int i = 0; i < list->size() && !replaced; ++i) {
      if (list->Get(i).name() == info.name()) {
        *list->Mutable(i) = info;
        replaced = true;
      }
    }
    if (!replaced) *list->Add() = info;
    // The coordinator keeps the job's newest `checkpoint.keep` checkpoints, as the
    // trainer does: resuming needs only the newest.
    std::vector<std::string> checkpoints;
    for (const v1::ArtifactInfo& a : *list) {
      if (absl::StartsWith(a.name(), "checkpoints/")) checkpoints.push_back(a.name());
    }
    const size_t keep = static_cast<size_t>(std::max(1, j.spec().checkpoint().keep() > 0
                                                            ? j.spec().checkpoint().keep()
                                                            : 2));
    if (checkpoints.size() <= keep) return;
    std::sort(checkpoints.begin(), checkpoints.end());
    pruned.assign(checkpoints.begin(), checkpoints.end() - keep);
    for (int i = list->size() - 1; i >= 0; --i) {
      if (std::find(pruned.begin(), pruned.end(), list->Get(i).name()) != pruned.end()) {
        list->DeleteSubrange(i, 1);
      }
    }
  }, if_final);
  if (!job.ok()) return job.status();
  for (const std::string& name : pruned) {
    absl::StatusOr<std::string> path = artifacts_->JobArtifactPath(rank.job_id(), name);
    if (path.ok()) std::remove(path->c_str());
  }
  return absl::OkStatus();
}

}  // namespace cohort::server
