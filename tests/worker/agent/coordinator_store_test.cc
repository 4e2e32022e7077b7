#include "worker/agent/coordinator_store.h"

#include <catch2/catch.hpp>

#include <thread>

#include "absl/time/clock.h"
#include "tests/worker/agent/fake_coordinator.h"

namespace cohort::agent {
namespace {

TEST_CASE("coordinator:// URLs are parsed, bad ones refused with the expected form",
          "[agent][store]") {
  absl::StatusOr<CoordinatorRendezvous> ok = ParseCoordinatorRendezvous("coordinator://10.0.0.1:7070/job-3/2");
  REQUIRE(ok.ok());
  CHECK(ok->coordinator.host == "10.0.0.1");
  CHECK(ok->coordinator.port == 7070);
  CHECK(ok->ns == "job-3/2");
  CHECK(ParseCoordinatorRendezvous("coordinator://[::1]:7070/j/1")->coordinator.host == "::1");
  CHECK(CoordinatorRendezvousUrl(HostPort{"::1", 7070}, "j/1") == "coordinator://[::1]:7070/j/1");
  for (const char* bad : {"file:///tmp/x", "coordinator://host:7070", "coordinator://host/j/1",
                          "coordinator://host:7070/j", "coordinator://host:7070/j/0",
                          "coordinator://host:7070//1", "coordinator://host:7070/j/x"}) {
    INFO(bad);
    absl::StatusOr<CoordinatorRendezvous> parsed = ParseCoordinatorRendezvous(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(parsed.status().message().find("coordinator://HOST:PORT/JOB_ID/ATTEMPT") != std::string::npos);
  }
  CHECK(IsCoordinatorRendezvous("coordinator://x"));
  CHECK_FALSE(IsCoordinatorRendezvous("file:///x"));
}

TEST_CASE("Set and Get go through the coordinator's namespace", "[agent][store]") {
  testing::FakeCoordinator coordinator;
  coordinator.With([](auto& s) { s.open_namespaces.insert("job-1/1"); });
  absl::StatusOr<std::unique_ptr<CoordinatorStore>> a =
      CoordinatorStore::Open("coordinator://" + coordinator.address() + "/job-1/1", {});
  absl::StatusOr<std::unique_ptr<CoordinatorStore>> b =
      CoordinatorStore::Open("coordinator://" + coordinator.address() + "/job-1/1", {});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE((*a)->Set("addr/0", std::string("\0bytes", 6)).ok());
  // A Get waits for a key that comes later.
  std::thread later([&] {
    absl::SleepFor(absl::Milliseconds(300));
    (*b)->Set("addr/1", "one").IgnoreError();
  });
  absl::StatusOr<std::vector<std::string>> got = (*b)->Get({"addr/0", "addr/1"}, absl::Seconds(10));
  later.join();
  REQUIRE(got.ok());
  CHECK(got->at(0) == std::string("\0bytes", 6));
  CHECK(got->at(1) == "one");
  CHECK(coordinator.With([](auto& s) { return s.keys.count("job-1/1/addr/0"); }) == 1);
  CHECK((*a)->Set("", "x").code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a missing key times out with the coordinator's message", "[agent][store]") {
  testing::FakeCoordinator coordinator;
  coordinator.With([](auto& s) { s.open_namespaces.insert("job-1/1"); });
  auto store = CoordinatorStore::Open("coordinator://" + coordinator.address() + "/job-1/1", {});
  REQUIRE(store.ok());
  absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::string>> got = (*store)->Get({"never"}, absl::Milliseconds(300));
  CHECK(got.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(got.status().message().find("never") != std::string::npos);
  CHECK(absl::Now() - start < absl::Seconds(4));
}

TEST_CASE("an ended attempt fails Set and Get at once with ABORTED", "[agent][store]") {
  testing::FakeCoordinator coordinator;
  coordinator.With([](auto& s) { s.open_namespaces.insert("job-1/2"); });
  auto store = CoordinatorStore::Open("coordinator://" + coordinator.address() + "/job-1/2", {});
  REQUIRE(store.ok());
  std::thread end([&] {
    absl::SleepFor(absl::Milliseconds(300));
    coordinator.With([](auto& s) { s.open_namespaces.clear(); });
  });
  absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::string>> got = (*store)->Get({"k"}, absl::Seconds(30));
  end.join();
  CHECK(got.status().code() == absl::StatusCode::kAborted);
  CHECK(got.status().message().find("ended") != std::string::npos);
  CHECK(absl::Now() - start < absl::Seconds(5));
  CHECK((*store)->Set("k", "v").code() == absl::StatusCode::kAborted);
}

TEST_CASE("an unreachable coordinator is retried, then UNAVAILABLE", "[agent][store]") {
  CoordinatorStore::Options options;
  options.retry_for = absl::Milliseconds(600);
  options.rpc_timeout = absl::Milliseconds(200);
  // Port 1 on loopback: nothing listens.
  auto store = CoordinatorStore::Open("coordinator://127.0.0.1:1/job-1/1", options);
  REQUIRE(store.ok());
  absl::Time start = absl::Now();
  absl::Status set = (*store)->Set("k", "v");
  CHECK(set.code() == absl::StatusCode::kUnavailable);
  CHECK(absl::Now() - start < absl::Seconds(5));
  CHECK((*store)->Get({"k"}, absl::Milliseconds(300)).status().code() ==
        absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace cohort::agent
