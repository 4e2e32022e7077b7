#include "server/worker_registry.h"

#include <random>

#include <spdlog/spdlog.h>

#include "common/logging.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/names.h"
#include "proto/time_convert.h"

namespace cohort::server {
namespace {

std::string NewLeaseId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("%016x%016x", rng(), rng());
}

absl::Status CheckRequest(const v1::RegisterRequest& r) {
  if (absl::Status s = CheckName(r.name(), "name"); !s.ok()) return s;
  if (r.instance_id().empty()) return absl::InvalidArgumentError("instance_id: must be set");
  if (r.address().empty()) return absl::InvalidArgumentError("address: must be set");
  if (r.resources().cpu_slots() < 0) {
    return absl::InvalidArgumentError("resources.cpu_slots: must not be negative");
  }
  if (r.resources().cpu_slots() == 0 && r.resources().gpus_size() == 0) {
    return absl::InvalidArgumentError("resources: the worker offers no CPU slots and no GPUs");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerRegistry>> WorkerRegistry::Create(Database* db, Clock* clock,
                                                                       Options options) {
  std::unique_ptr<WorkerRegistry> registry(new WorkerRegistry(db, clock, options));
  if (absl::Status s = registry->Load(); !s.ok()) return s;
  return registry;
}

absl::Status WorkerRegistry::Load() {
  auto stmt = db_->Prepare(
      "SELECT name, address, resources, state, version, registered_at_us, last_seen_us "
      "FROM workers");
  if (!stmt.ok()) return stmt.status();
  absl::MutexLock lock(&mu_);
  while (true) {
    absl::StatusOr<bool> row = (*stmt)->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    Entry e;
    e.info.set_name((*stmt)->ColumnText(0));
    e.info.set_address((*stmt)->ColumnText(1));
    if (!e.info.mutable_resources()->ParseFromString((*stmt)->ColumnText(2))) {
      return absl::DataLossError(
          absl::StrCat(db_->path(), ": worker '", e.info.name(), "' has unreadable resources"));
    }
    auto state = static_cast<v1::WorkerState>((*stmt)->ColumnInt(3));
    e.info.set_version((*stmt)->ColumnText(4));
    ToProto(absl::FromUnixMicros((*stmt)->ColumnInt(5)), e.info.mutable_registered_at());
    ToProto(absl::FromUnixMicros((*stmt)->ColumnInt(6)), e.info.mutable_last_seen());
    bool was_alive = state == v1::WORKER_STATE_ALIVE;
    e.info.set_state(was_alive ? v1::WORKER_STATE_LOST : state);
    if (was_alive) {
      if (absl::Status s = Persist(e); !s.ok()) return s;
    }
    workers_[e.info.name()] = std::move(e);
  }
  return absl::OkStatus();
}

absl::Status WorkerRegistry::Persist(Entry& e) {
  auto stmt = db_->Prepare(
      "INSERT INTO workers (name, address, resources, state, version, registered_at_us, "
      "last_seen_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(name) DO UPDATE SET "
      "address=?2, resources=?3, state=?4, version=?5, registered_at_us=?6, last_seen_us=?7");
  if (!stmt.ok()) return stmt.status();
  (*stmt)
      ->Bind(1, e.info.name())
      .Bind(2, e.info.address())
      .BindBlob(3, e.info.resources().SerializeAsString())
      .Bind(4, static_cast<int64_t>(e.info.state()))
      .Bind(5, e.info.version())
      .Bind(6, absl::ToUnixMicros(FromProto(e.info.registered_at())))
      .Bind(7, absl::ToUnixMicros(FromProto(e.info.last_seen())));
  absl::Status s = (*stmt)->Run();
  if (s.ok()) e.persisted = clock_->Now();
  return s;
}

absl::StatusOr<v1::RegisterResponse> WorkerRegistry::Register(const v1::RegisterRequest& request) {
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  absl::Time now = clock_->Now();
  auto it = workers_.find(request.name());
  if (it != workers_.end() && !it->second.lease_id.empty() &&
      it->second.instance_id != request.instance_id()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "worker name '", request.name(), "' is held by a live agent at ",
        it->second.info.address(), "; its lease expires in ",
        absl::FormatDuration(absl::Ceil(it->second.expires - now, absl::Seconds(1)))));
  }
  Entry next = it != workers_.end() ? it->second : Entry{};
  const std::string old_lease = next.lease_id;
  next.info.set_name(request.name());
  next.info.set_address(request.address());
  *next.info.mutable_resources() = request.resources();
  next.info.set_state(v1::WORKER_STATE_ALIVE);
  next.info.set_version(request.version());
  ToProto(now, next.info.mutable_registered_at());
  ToProto(now, next.info.mutable_last_seen());
  next.instance_id = request.instance_id();
  next.lease_id = NewLeaseId();
  next.expires = now + options_.lease_ttl;
  if (absl::Status s = Persist(next); !s.ok()) return s;

  if (!old_lease.empty()) leases_.erase(old_lease);
  leases_[next.lease_id] = next.info.name();
  v1::RegisterResponse response;
  response.set_lease_id(next.lease_id);
  ToProto(options_.lease_ttl, response.mutable_lease_ttl());
  ToProto(options_.lease_ttl / 3, response.mutable_heartbeat_interval());
  spdlog::info("worker {} registered from {} ({} CPU slots, {} GPUs)", next.info.name(),
               next.info.address(), next.info.resources().cpu_slots(),
               next.info.resources().gpus_size());
  workers_[next.info.name()] = std::move(next);
  return response;
}

WorkerRegistry::Entry* WorkerRegistry::FindLease(const std::string& lease_id) {
  auto lease = leases_.find(lease_id);
  if (lease == leases_.end()) return nullptr;
  return &workers_.at(lease->second);
}

absl::StatusOr<v1::HeartbeatResponse> WorkerRegistry::Heartbeat(
    const v1::HeartbeatRequest& request) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  Entry* e = FindLease(request.lease_id());
  if (e == nullptr) {
    return absl::NotFoundError("unknown or expired lease: register again");
  }
  absl::Time now = clock_->Now();
  e->expires = now + options_.lease_ttl;
  ToProto(now, e->info.mutable_last_seen());
  if (now - e->persisted >= options_.lease_ttl) {
    if (absl::Status s = Persist(*e); !s.ok()) return s;
  }
  v1::HeartbeatResponse response;
  ToProto(options_.lease_ttl, response.mutable_lease_ttl());
  return response;
}

absl::Status WorkerRegistry::Deregister(const v1::DeregisterRequest& request) {
  absl::MutexLock lock(&mu_);
  Entry* e = FindLease(request.lease_id());
  if (e == nullptr) return absl::NotFoundError("unknown or expired lease");
  leases_.erase(e->lease_id);
  e->lease_id.clear();
  e->info.set_state(v1::WORKER_STATE_LEFT);
  ToProto(clock_->Now(), e->info.mutable_last_seen());
  spdlog::info("worker {} left", e->info.name());
  if (listener_) listener_(e->info.name(), v1::WORKER_STATE_LEFT);
  return Persist(*e);
}

std::vector<std::string> WorkerRegistry::ExpireLeases() {
  absl::MutexLock lock(&mu_);
  return ExpireLocked();
}

std::vector<std::string> WorkerRegistry::ExpireLocked() {
  std::vector<std::string> expired;
  absl::Time now = clock_->Now();
  for (auto& [name, e] : workers_) {
    if (e.lease_id.empty() || e.expires > now) continue;
    leases_.erase(e.lease_id);
    e.lease_id.clear();
    e.info.set_state(v1::WORKER_STATE_LOST);
    if (absl::Status s = Persist(e); !s.ok()) {
      spdlog::error("cannot record worker {} as lost: {}", name, s.message());
    }
    spdlog::warn("worker {} lost: no heartbeat for {}", name,
                 absl::FormatDuration(now - FromProto(e.info.last_seen())));
    expired.push_back(name);
    if (listener_) listener_(name, v1::WORKER_STATE_LOST);
  }
  return expired;
}

absl::StatusOr<std::string> WorkerRegistry::LeaseOwner(const std::string& lease_id) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  Entry* e = FindLease(lease_id);
  if (e == nullptr) return absl::NotFoundError("unknown or expired lease: register again");
  return e->info.name();
}

void WorkerRegistry::SetListener(Listener listener) {
  absl::MutexLock lock(&mu_);
  listener_ = std::move(listener);
}

std::vector<v1::WorkerInfo> WorkerRegistry::List(const std::vector<v1::WorkerState>& states) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  std::vector<v1::WorkerInfo> out;
  for (const auto& [name, e] : workers_) {
    if (!states.empty() && std::find(states.begin(), states.end(), e.info.state()) == states.end()) {
      continue;
    }
    out.push_back(e.info);
  }
  return out;
}

}  // namespace cohort::server
