#pragma once

// WorkerRegistry: the coordinator's record of agents and their leases.
//
// Contract (see proto/cohort/v1/worker_service.proto for the protocol):
// - Register grants a lease of `lease_ttl` to an agent under its name. A name whose
//   lease is live from another agent instance is refused with ALREADY_EXISTS.
// - Heartbeat renews a lease; an unknown or expired lease answers NOT_FOUND, telling
//   the agent to register again.
// - A lease that is not renewed within `lease_ttl` expires: the worker becomes LOST.
//   ExpireLeases() does this; the coordinator calls it periodically, and every query
//   calls it first so no answer shows a stale ALIVE.
// - Deregister ends a lease cleanly: the worker becomes LEFT.
// Leases live in memory only: they belong to one coordinator process. Worker records
// (name, address, resources, state, times) are written to the database before a call
// returns, so a restarted coordinator lists every worker it knew, as LOST until each
// registers again. A heartbeat only moves last_seen, and writes it at most once per
// `lease_ttl` (1,000 agents at one heartbeat per second would otherwise be 1,000
// database writes per second): the stored last_seen is at most one TTL old.
//
// - A listener (SetListener) hears of every worker that becomes LOST or LEFT, so the
//   job manager can fail the attempts that ran there. It is called with the registry's
//   lock held: it must return quickly and must not call the registry.
//
// Thread safety: all methods may be called from any thread.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/worker_service.pb.h"
#include "common/clock.h"
#include "server/database.h"

namespace cohort::server {

class WorkerRegistry {
 public:
  struct Options {
    absl::Duration lease_ttl = absl::Seconds(10);
  };

  // Loads the known workers from `db`; those that were ALIVE become LOST (their leases
  // died with the previous coordinator). `db` and `clock` must outlive the registry.
  static absl::StatusOr<std::unique_ptr<WorkerRegistry>> Create(Database* db, Clock* clock,
                                                                Options options);

  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  absl::Status Deregister(const v1::DeregisterRequest& request);

  // Marks every worker whose lease has expired LOST. Returns the names it marked.
  std::vector<std::string> ExpireLeases();

  // The name of the worker holding live lease `lease_id`; NOT_FOUND "unknown or
  // expired lease: register again" otherwise.
  absl::StatusOr<std::string> LeaseOwner(const std::string& lease_id);

  using Listener = std::function<void(const std::string& name, v1::WorkerState state)>;
  void SetListener(Listener listener);

  // Every known worker in `states` (all when empty), ordered by name.
  std::vector<v1::WorkerInfo> List(const std::vector<v1::WorkerState>& states = {});

 private:
  struct Entry {
    v1::WorkerInfo info;
    std::string instance_id;
    std::string lease_id;  // empty when no lease is held
    absl::Time expires;
    absl::Time persisted = absl::InfinitePast();  // when the row was last written
  };

  WorkerRegistry(Database* db, Clock* clock, Options options)
      : db_(db), clock_(clock), options_(options) {}
  absl::Status Load();
  absl::Status Persist(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> ExpireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finds the live entry holding `lease_id`, or null.
  Entry* FindLease(const std::string& lease_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Database* const db_;
  Clock* const clock_;
  const Options options_;

  absl::Mutex mu_;
  std::map<std::string, Entry> workers_ ABSL_GUARDED_BY(mu_);        // by name
  std::map<std::string, std::string> leases_ ABSL_GUARDED_BY(mu_);   // lease id -> name
  Listener listener_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::server
