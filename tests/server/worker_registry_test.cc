#include "server/worker_registry.h"

#include <catch2/catch.hpp>

#include "proto/time_convert.h"
#include "tests/support/temp_dir.h"

namespace cohort::server {
namespace {

using cohort::testing::TempDir;

v1::RegisterRequest Request(const std::string& name, const std::string& instance, int slots = 2) {
  v1::RegisterRequest r;
  r.set_name(name);
  r.set_instance_id(instance);
  r.set_address("10.0.0.1");
  r.mutable_resources()->set_cpu_slots(slots);
  r.set_version("test");
  return r;
}

struct Fixture {
  TempDir dir;
  ManualClock clock;
  std::unique_ptr<Database> db = *Database::Open(dir.File("cohort.db"));
  std::unique_ptr<WorkerRegistry> registry =
      *WorkerRegistry::Create(db.get(), &clock, {.lease_ttl = absl::Seconds(10)});
};

v1::WorkerState StateOf(WorkerRegistry& r, const std::string& name) {
  for (const auto& w : r.List()) {
    if (w.name() == name) return w.state();
  }
  return v1::WORKER_STATE_UNSPECIFIED;
}

TEST_CASE("A registered worker stays alive while it heartbeats", "[server]") {
  Fixture f;
  auto lease = f.registry->Register(Request("w1", "i1"));
  REQUIRE(lease.ok());
  CHECK(lease->heartbeat_interval().seconds() == 3);
  for (int i = 0; i < 5; ++i) {
    f.clock.Advance(absl::Seconds(9));
    v1::HeartbeatRequest hb;
    hb.set_lease_id(lease->lease_id());
    REQUIRE(f.registry->Heartbeat(hb).ok());
  }
  CHECK(StateOf(*f.registry, "w1") == v1::WORKER_STATE_ALIVE);
}

TEST_CASE("A worker whose lease expires is lost, and must register again", "[server]") {
  Fixture f;
  auto lease = f.registry->Register(Request("w1", "i1"));
  REQUIRE(lease.ok());
  f.clock.Advance(absl::Seconds(9));
  CHECK(f.registry->ExpireLeases().empty());
  f.clock.Advance(absl::Seconds(2));
  CHECK(f.registry->ExpireLeases() == std::vector<std::string>{"w1"});
  CHECK(StateOf(*f.registry, "w1") == v1::WORKER_STATE_LOST);

  v1::HeartbeatRequest hb;
  hb.set_lease_id(lease->lease_id());
  CHECK(f.registry->Heartbeat(hb).status().code() == absl::StatusCode::kNotFound);
  REQUIRE(f.registry->Register(Request("w1", "i1")).ok());
  CHECK(StateOf(*f.registry, "w1") == v1::WORKER_STATE_ALIVE);
}

TEST_CASE("A second agent cannot take a name whose lease is live", "[server]") {
  Fixture f;
  REQUIRE(f.registry->Register(Request("w1", "first")).ok());
  auto second = f.registry->Register(Request("w1", "second"));
  REQUIRE(second.status().code() == absl::StatusCode::kAlreadyExists);
  CHECK(std::string(second.status().message()).find("expires in 10s") != std::string::npos);
  // The same instance may register again (it lost track of its lease).
  CHECK(f.registry->Register(Request("w1", "first")).ok());
  // Once the lease expires, the name is free.
  f.clock.Advance(absl::Seconds(11));
  CHECK(f.registry->Register(Request("w1", "second")).ok());
}

TEST_CASE("Deregister marks a worker LEFT and ends its lease", "[server]") {
  Fixture f;
  auto lease = f.registry->Register(Request("w1", "i1"));
  REQUIRE(lease.ok());
  v1::DeregisterRequest d;
  d.set_lease_id(lease->lease_id());
  REQUIRE(f.registry->Deregister(d).ok());
  CHECK(StateOf(*f.registry, "w1") == v1::WORKER_STATE_LEFT);
  CHECK(f.registry->Deregister(d).code() == absl::StatusCode::kNotFound);
}

TEST_CASE("Register refuses bad requests naming the field", "[server]") {
  Fixture f;
  auto bad_name = f.registry->Register(Request("../etc", "i"));
  CHECK(bad_name.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(bad_name.status().message()).rfind("name: ", 0) == 0);
  auto no_slots = f.registry->Register(Request("w", "i", 0));
  CHECK(std::string(no_slots.status().message()).find("no CPU slots and no GPUs") !=
        std::string::npos);
  CHECK(f.registry->List().empty());
}

TEST_CASE("A restarted registry lists known workers as LOST until they return", "[server]") {
  TempDir dir;
  ManualClock clock;
  auto db = *Database::Open(dir.File("cohort.db"));
  {
    auto registry = *WorkerRegistry::Create(db.get(), &clock, {});
    REQUIRE(registry->Register(Request("w1", "i1", 3)).ok());
    REQUIRE(registry->Register(Request("w2", "i2")).ok());
  }
  auto registry = *WorkerRegistry::Create(db.get(), &clock, {});
  auto workers = registry->List();
  REQUIRE(workers.size() == 2);
  CHECK(workers[0].name() == "w1");
  CHECK(workers[0].resources().cpu_slots() == 3);
  CHECK(workers[0].state() == v1::WORKER_STATE_LOST);
  CHECK(workers[1].state() == v1::WORKER_STATE_LOST);
  // The old agents' instance ids no longer hold leases: they register right away.
  REQUIRE(registry->Register(Request("w1", "i1", 3)).ok());
  CHECK(StateOf(*registry, "w1") == v1::WORKER_STATE_ALIVE);
  CHECK(registry->List({v1::WORKER_STATE_ALIVE}).size() == 1);
}

TEST_CASE("Heartbeats write last_seen to the database at most once per lease TTL", "[server]") {
  TempDir dir;
  ManualClock clock;
  const absl::Time registered = clock.Now();
  auto db = *Database::Open(dir.File("cohort.db"));
  // What a coordinator restarted now would list as w1's last_seen.
  auto stored_last_seen = [&] {
    auto reader = *WorkerRegistry::Create(db.get(), &clock, {});
    return FromProto(reader->List().at(0).last_seen());
  };
  auto registry = *WorkerRegistry::Create(db.get(), &clock, {.lease_ttl = absl::Seconds(10)});
  auto lease = registry->Register(Request("w1", "i1"));
  REQUIRE(lease.ok());
  v1::HeartbeatRequest hb;
  hb.set_lease_id(lease->lease_id());
  for (int i = 0; i < 3; ++i) {
    clock.Advance(absl::Seconds(3));
    REQUIRE(registry->Heartbeat(hb).ok());
  }
  // 9 s after registering: in memory the heartbeat is current, the row not yet rewritten.
  CHECK(FromProto(registry->List().at(0).last_seen()) == registered + absl::Seconds(9));
  CHECK(stored_last_seen() == registered);
  clock.Advance(absl::Seconds(3));
  REQUIRE(registry->Heartbeat(hb).ok());  // 12 s: more than a TTL since the last write
  CHECK(stored_last_seen() == registered + absl::Seconds(12));
}

}  // namespace
}  // namespace cohort::server
