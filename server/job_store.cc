#include "server/job_store.h"

#include <algorithm>
#include <random>

#include <spdlog/spdlog.h>

#include "common/logging.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "proto/time_convert.h"

namespace cohort::server {
namespace {

constexpr int32_t kDefaultPageSize = 100;
constexpr int32_t kMaxPageSize = 1000;
constexpr absl::string_view kPageTokenPrefix = "jobs-before:";

// The columns every job query reads, in this order.
constexpr absl::string_view kJobColumns = "id, spec, job";

std::string NewJobId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("job-%012x", rng() & 0xffffffffffffULL);
}

// Undoes an edit's change to what no edit may change (Update and Transition).
void KeepFixedFields(const v1::Job& current, v1::Job& job) {
  job.set_id(current.id());
  *job.mutable_spec() = current.spec();
  job.set_owner(current.owner());
  *job.mutable_created_at() = current.created_at();
}

absl::Status NotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
}

// Reads a row of kJobColumns at `first`.
absl::StatusOr<v1::Job> ReadJob(const Statement& stmt, const std::string& path, int first = 0) {
  std::string id = stmt.ColumnText(first);
  v1::Job job;
  if (!job.ParseFromString(stmt.ColumnText(first + 2))) {
    return absl::InternalError(
        absl::StrCat(path, ": job '", id, "' has a corrupt stored record (it does not parse)"));
  }
  if (!job.mutable_spec()->ParseFromString(stmt.ColumnText(first + 1))) {
    return absl::InternalError(
        absl::StrCat(path, ": job '", id, "' has a corrupt stored spec (it does not parse)"));
  }
  job.set_id(id);
  return job;
}

// Holds BEGIN IMMEDIATE ... COMMIT; rolls back unless committed.
class Transaction {
 public:
  explicit Transaction(Database* db) : db_(db) {}
  ~Transaction() {
    if (open_) {
      if (absl::Status s = db_->Exec("ROLLBACK"); !s.ok()) {
        spdlog::error("job store: rollback failed: {}", s);
      }
    }
  }
  absl::Status Begin() {
    absl::Status s = db_->Exec("BEGIN IMMEDIATE");
    open_ = s.ok();
    return s;
  }
  absl::Status Commit() {
    absl::Status s = db_->Exec("COMMIT");
    if (s.ok()) open_ = false;
    return s;
  }

 private:
  Database* db_;
  bool open_ = false;
};

std::string StateList(const std::vector<v1::JobState>& states) {
  return absl::StrJoin(states, ",", [](std::string* out, v1::JobState s) {
    absl::StrAppend(out, static_cast<int>(s));
  });
}

}  // namespace

std::string JobStore::StateName(v1::JobState state) {
  std::string name = v1::JobState_Name(state);
  absl::string_view v = name;
  absl::ConsumePrefix(&v, "JOB_STATE_");
  return v.empty() ? absl::StrCat(static_cast<int>(state)) : std::string(v);
}

bool JobStore::IsFinal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

bool JobStore::IsLegal(v1::JobState from, v1::JobState to) {
  using S = v1::JobState;
  if (from == v1::JOB_STATE_UNSPECIFIED || IsFinal(from) || from == to) return false;
  if (to == v1::JOB_STATE_CANCELLED) return true;
  switch (from) {
    case S::JOB_STATE_QUEUED:
      return to == v1::JOB_STATE_STARTING;
    case S::JOB_STATE_STARTING:
      return to == v1::JOB_STATE_RUNNING || to == v1::JOB_STATE_RESTARTING ||
             to == v1::JOB_STATE_FAILED || to == v1::JOB_STATE_QUEUED;
    case S::JOB_STATE_RUNNING:
      return to == v1::JOB_STATE_RESTARTING || to == v1::JOB_STATE_SUCCEEDED ||
             to == v1::JOB_STATE_FAILED || to == v1::JOB_STATE_QUEUED;
    case S::JOB_STATE_RESTARTING:
      return to == v1::JOB_STATE_STARTING || to == v1::JOB_STATE_QUEUED ||
             to == v1::JOB_STATE_FAILED;
    default:
      return false;
  }
}

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Create(Database* db, Clock* clock) {
  // Fails early on a database without the job tables (it would be a bug in Migrate).
  auto stmt = db->Prepare("SELECT count(*) FROM jobs");
  if (!stmt.ok()) return stmt.status();
  if (auto row = (*stmt)->Step(); !row.ok()) return row.status();
  return std::unique_ptr<JobStore>(new JobStore(db, clock));
}

absl::StatusOr<v1::Job> JobStore::GetLocked(const std::string& id) {
  auto stmt = db_->Prepare(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id = ?1"));
  if (!stmt.ok()) return stmt.status();
  (*stmt)->Bind(1, id);
  absl::StatusOr<bool> row = (*stmt)->Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound(id);
  return ReadJob(**stmt, db_->path());
}

absl::StatusOr<std::string> JobStore::FindByKey(const std::string& owner,
                                                const std::string& key) {
  auto stmt = db_->Prepare("SELECT id FROM jobs WHERE owner = ?1 AND idempotency_key = ?2");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->Bind(1, owner).Bind(2, key);
  absl::StatusOr<bool> row = (*stmt)->Step();
  if (!row.ok()) return row.status();
  return *row ? (*stmt)->ColumnText(0) : std::string();
}

absl::Status JobStore::WriteJob(const v1::Job& job) {
  v1::Job rest = job;
  rest.clear_spec();
  rest.clear_id();
  auto stmt = db_->Prepare("UPDATE jobs SET state = ?1, job = ?2 WHERE id = ?3");
  if (!stmt.ok()) return stmt.status();
  (*stmt)
      ->Bind(1, static_cast<int64_t>(job.state()))
      .BindBlob(2, rest.SerializeAsString())
      .Bind(3, job.id());
  return (*stmt)->Run();
}

absl::Status JobStore::WriteEvent(const v1::JobEvent& event) {
  auto stmt = db_->Prepare("INSERT INTO job_events (job_id, sequence, event) VALUES (?1, ?2, ?3)");
  if (!stmt.ok()) return stmt.status();
  (*stmt)
      ->Bind(1, event.job_id())
      .Bind(2, event.sequence())
      .BindBlob(3, event.SerializeAsString());
  return (*stmt)->Run();
}

absl::StatusOr<v1::Job> JobStore::Insert(const v1::JobSpec& spec,
                                         const std::string& idempotency_key,
                                         const std::string& owner) {
  if (spec.model_case() == v1::JobSpec::kKerasFile) {
    return absl::InvalidArgumentError(
        "spec.keras_file: the model bytes must be stored outside the job store");
  }
  if (spec.model_case() == v1::JobSpec::kConfigJson) {
    return absl::InvalidArgumentError(
        "spec.config_json: the model config must be stored outside the job store");
  }
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status s = tx.Begin(); !s.ok()) return s;

  if (!idempotency_key.empty()) {
    absl::StatusOr<std::string> existing = FindByKey(owner, idempotency_key);
    if (!existing.ok()) return existing.status();
    if (!existing->empty()) return GetLocked(*existing);  // the rollback changes nothing
  }

  std::string id;
  for (int tries = 0; id.empty(); ++tries) {
    std::string candidate = NewJobId();
    absl::StatusOr<v1::Job> taken = GetLocked(candidate);
    if (taken.status().code() == absl::StatusCode::kNotFound) {
      id = candidate;
    } else if (!taken.ok() && taken.status().code() != absl::StatusCode::kInternal) {
      return taken.status();
    } else if (tries > 100) {
      return absl::InternalError("cannot find an unused job id");
    }
  }

  absl::Time now = clock_->Now();
  v1::Job job;
  job.set_id(id);
  *job.mutable_spec() = spec;
  job.set_state(v1::JOB_STATE_QUEUED);
  job.set_owner(owner);
  ToProto(now, job.mutable_created_at());
  job.set_last_sequence(1);

  v1::Job rest = job;
  rest.clear_spec();
  rest.clear_id();
  auto stmt = db_->Prepare(
      "INSERT INTO jobs (id, owner, idempotency_key, state, priority, workers, device, "
      "created_at_us, spec, job) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->Bind(1, id).Bind(2, owner);
  if (idempotency_key.empty()) {
    (*stmt)->BindNull(3);
  } else {
    (*stmt)->Bind(3, idempotency_key);
  }
  (*stmt)
      ->Bind(4, static_cast<int64_t>(job.state()))
      .Bind(5, static_cast<int64_t>(spec.priority()))
      .Bind(6, static_cast<int64_t>(spec.resources().workers()))
      .Bind(7, static_cast<int64_t>(spec.resources().device()))
      .Bind(8, absl::ToUnixMicros(now))
      .BindBlob(9, spec.SerializeAsString())
      .BindBlob(10, rest.SerializeAsString());
  if (absl::Status s = (*stmt)->Run(); !s.ok()) return s;

  v1::JobEvent event;
  event.set_job_id(id);
  event.set_sequence(1);
  ToProto(now, event.mutable_time());
  event.mutable_state_change()->set_from(v1::JOB_STATE_UNSPECIFIED);
  event.mutable_state_change()->set_to(v1::JOB_STATE_QUEUED);
  if (absl::Status s = WriteEvent(event); !s.ok()) return s;
  if (absl::Status s = tx.Commit(); !s.ok()) return s;
  return job;
}

absl::StatusOr<v1::Job> JobStore::Get(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return GetLocked(id);
}

absl::StatusOr<v1::ListJobsResponse> JobStore::List(const std::vector<v1::JobState>& states,
                                                    int32_t page_size,
                                                    const std::string& page_token,
                                                    const std::string& owner) {
  if (page_size <= 0) page_size = kDefaultPageSize;
  page_size = std::min(page_size, kMaxPageSize);
  int64_t before = INT64_MAX;
  if (!page_token.empty()) {
    std::string decoded;
    bool ok = absl::WebSafeBase64Unescape(page_token, &decoded);
    absl::string_view v = decoded;
    if (!ok || !absl::ConsumePrefix(&v, kPageTokenPrefix) || !absl::SimpleAtoi(v, &before)) {
      return absl::InvalidArgumentError("page_token: not a token from an earlier ListJobs");
    }
  }
  std::string sql = absl::StrCat("SELECT seq, ", kJobColumns, " FROM jobs WHERE seq < ?1");
  if (!states.empty()) absl::StrAppend(&sql, " AND state IN (", StateList(states), ")");
  if (!owner.empty()) absl::StrAppend(&sql, " AND owner = ?3");
  absl::StrAppend(&sql, " ORDER BY seq DESC LIMIT ?2");

  absl::MutexLock lock(&mu_);
  auto stmt = db_->Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  (*stmt)->Bind(1, before).Bind(2, static_cast<int64_t>(page_size) + 1);
  if (!owner.empty()) (*stmt)->Bind(3, owner);
  v1::ListJobsResponse response;
  int64_t last_seq = 0;
  while (true) {
    absl::StatusOr<bool> row = (*stmt)->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    if (response.jobs_size() == page_size) {
      std::string token = absl::StrCat(kPageTokenPrefix, last_seq);
      response.set_next_page_token(absl::WebSafeBase64Escape(token));
      break;
    }
    last_seq = (*stmt)->ColumnInt(0);
    absl::StatusOr<v1::Job> job = ReadJob(**stmt, db_->path(), 1);
    if (!job.ok()) return job.status();
    *response.add_jobs() = *std::move(job);
  }
  return response;
}

absl::StatusOr<std::vector<QueuedJob>> JobStore::Queued() {
  return InStates({v1::JOB_STATE_QUEUED});
}

absl::StatusOr<std::vector<QueuedJob>> JobStore::Waiting(int64_t max_cpu, int64_t max_gpu) {
  const std::vector<v1::JobState> waiting = {v1::JOB_STATE_QUEUED, v1::JOB_STATE_RESTARTING};
  if (max_cpu == INT64_MAX && max_gpu == INT64_MAX) return InStates(waiting);
  const std::string cuda = absl::StrCat(static_cast<int>(v1::DEVICE_TYPE_CUDA));
  std::vector<QueuedJob> out;
  for (auto [where, limit] : {std::pair{"device != " + cuda, max_cpu},
                              std::pair{"device = " + cuda, max_gpu}}) {
    if (limit <= 0) continue;
    absl::StatusOr<std::vector<QueuedJob>> some = InStates(waiting, where, limit);
    if (!some.ok()) return some.status();
    out.insert(out.end(), some->begin(), some->end());
  }
  std::stable_sort(out.begin(), out.end(), [](const QueuedJob& a, const QueuedJob& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.sequence < b.sequence;
  });
  return out;
}

absl::StatusOr<std::vector<QueuedJob>> JobStore::InStates(const std::vector<v1::JobState>& states,
                                                          const std::string& where,
                                                          int64_t limit) {
  absl::MutexLock lock(&mu_);
  auto stmt = db_->Prepare(absl::StrCat(
      "SELECT id, priority, seq, workers, device FROM jobs WHERE state IN (", StateList(states),
      ")", where.empty() ? "" : " AND ", where, " ORDER BY priority DESC, seq ASC LIMIT ?1"));
  if (!stmt.ok()) return stmt.status();
  (*stmt)->Bind(1, limit);
  std::vector<QueuedJob> out;
  while (true) {
    absl::StatusOr<bool> row = (*stmt)->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    QueuedJob q;
    q.id = (*stmt)->ColumnText(0);
    q.priority = static_cast<int32_t>((*stmt)->ColumnInt(1));
    q.sequence = (*stmt)->ColumnInt(2);
    q.ranks = std::max<int32_t>(1, static_cast<int32_t>((*stmt)->ColumnInt(3)));
    q.kind = (*stmt)->ColumnInt(4) == v1::DEVICE_TYPE_CUDA ? SlotKind::kGpu : SlotKind::kCpu;
    out.push_back(std::move(q));
  }
  return out;
}

absl::StatusOr<v1::Job> JobStore::Update(const std::string& id,
                                         const std::function<void(v1::Job&)>& edit,
                                         IfFinal if_final) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status s = tx.Begin(); !s.ok()) return s;
  absl::StatusOr<v1::Job> current = GetLocked(id);
  if (!current.ok()) return current.status();
  if (IsFinal(current->state()) && if_final == IfFinal::kRefuse) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", id, "' is ", StateName(current->state()), " and cannot change"));
  }
  v1::Job job = *current;
  if (edit) edit(job);
  KeepFixedFields(*current, job);
  job.set_state(current->state());
  job.set_reason(current->reason());
  job.set_last_sequence(current->last_sequence());
  if (absl::Status s = WriteJob(job); !s.ok()) return s;
  if (absl::Status s = tx.Commit(); !s.ok()) return s;
  return job;
}

absl::StatusOr<v1::Job> JobStore::Transition(const std::string& id, v1::JobState to,
                                             const std::string& reason,
                                             const std::function<void(v1::Job&)>& edit) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status s = tx.Begin(); !s.ok()) return s;
  absl::StatusOr<v1::Job> current = GetLocked(id);
  if (!current.ok()) return current.status();
  const v1::JobState from = current->state();
  if (!IsLegal(from, to)) {
    return absl::FailedPreconditionError(absl::StrCat("job '", id, "' is ", StateName(from),
                                                      " and cannot become ", StateName(to)));
  }
  v1::Job job = *current;
  if (edit) edit(job);
  KeepFixedFields(*current, job);

  absl::Time now = clock_->Now();
  job.set_state(to);
  job.set_reason(reason);
  if (to == v1::JOB_STATE_STARTING && !job.has_started_at()) {
    ToProto(now, job.mutable_started_at());
  }
  if (IsFinal(to)) ToProto(now, job.mutable_finished_at());
  job.set_last_sequence(current->last_sequence() + 1);

  v1::JobEvent event;
  event.set_job_id(id);
  event.set_sequence(job.last_sequence());
  ToProto(now, event.mutable_time());
  event.set_attempt(job.attempt());
  event.mutable_state_change()->set_from(from);
  event.mutable_state_change()->set_to(to);
  event.mutable_state_change()->set_reason(reason);

  if (absl::Status s = WriteJob(job); !s.ok()) return s;
  if (absl::Status s = WriteEvent(event); !s.ok()) return s;
  if (absl::Status s = tx.Commit(); !s.ok()) return s;
  return job;
}

absl::StatusOr<v1::JobEvent> JobStore::AppendEvent(const std::string& id, v1::JobEvent event) {
  if (event.has_state_change()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job '", id, "': a state change is recorded by Transition, not AppendEvent"));
  }
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status s = tx.Begin(); !s.ok()) return s;
  absl::StatusOr<v1::Job> job = GetLocked(id);
  if (!job.ok()) return job.status();
  if (IsFinal(job->state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", id, "' is ", StateName(job->state()), " and takes no more events"));
  }
  job->set_last_sequence(job->last_sequence() + 1);
  event.set_job_id(id);
  event.set_sequence(job->last_sequence());
  ToProto(clock_->Now(), event.mutable_time());
  if (event.attempt() == 0) event.set_attempt(job->attempt());
  if (event.has_epoch()) *job->mutable_last_epoch() = event.epoch();

  if (absl::Status s = WriteJob(*job); !s.ok()) return s;
  if (absl::Status s = WriteEvent(event); !s.ok()) return s;
  if (absl::Status s = tx.Commit(); !s.ok()) return s;
  return event;
}

absl::StatusOr<std::vector<v1::JobEvent>> JobStore::Events(const std::string& id,
                                                           int64_t after_sequence, int32_t limit) {
  absl::MutexLock lock(&mu_);
  {
    auto exists = db_->Prepare("SELECT 1 FROM jobs WHERE id = ?1");
    if (!exists.ok()) return exists.status();
    (*exists)->Bind(1, id);
    absl::StatusOr<bool> row = (*exists)->Step();
    if (!row.ok()) return row.status();
    if (!*row) return NotFound(id);
  }
  auto stmt = db_->Prepare(
      "SELECT sequence, event FROM job_events WHERE job_id = ?1 AND sequence > ?2 "
      "ORDER BY sequence LIMIT ?3");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->Bind(1, id).Bind(2, after_sequence).Bind(3, limit > 0 ? int64_t{limit} : int64_t{-1});
  std::vector<v1::JobEvent> out;
  while (true) {
    absl::StatusOr<bool> row = (*stmt)->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    v1::JobEvent event;
    if (!event.ParseFromString((*stmt)->ColumnText(1))) {
      return absl::InternalError(absl::StrCat(db_->path(), ": event ", (*stmt)->ColumnInt(0),
                                              " of job '", id, "' is corrupt (it does not parse)"));
    }
    out.push_back(std::move(event));
  }
  return out;
}

absl::StatusOr<int64_t> JobStore::CountActive(const std::string& owner) {
  absl::MutexLock lock(&mu_);
  auto stmt = db_->Prepare(absl::StrCat(
      "SELECT count(*) FROM jobs WHERE state IN (",
      StateList({v1::JOB_STATE_QUEUED, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING,
                 v1::JOB_STATE_RESTARTING}),
      ")", owner.empty() ? "" : " AND owner = ?1"));
  if (!stmt.ok()) return stmt.status();
  if (!owner.empty()) (*stmt)->Bind(1, owner);
  if (auto row = (*stmt)->Step(); !row.ok()) return row.status();
  return (*stmt)->ColumnInt(0);
}

absl::StatusOr<std::vector<v1::Job>> JobStore::Unfinished() {
  absl::MutexLock lock(&mu_);
  auto stmt = db_->Prepare(absl::StrCat(
      "SELECT ", kJobColumns, " FROM jobs WHERE state IN (",
      StateList({v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING, v1::JOB_STATE_RESTARTING}),
      ") ORDER BY seq"));
  if (!stmt.ok()) return stmt.status();
  std::vector<v1::Job> out;
  while (true) {
    absl::StatusOr<bool> row = (*stmt)->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    absl::StatusOr<v1::Job> job = ReadJob(**stmt, db_->path());
    if (!job.ok()) return job.status();
    out.push_back(*std::move(job));
  }
  return out;
}

}  // namespace cohort::server
