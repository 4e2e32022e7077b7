#include "worker/agent/event_forwarder.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "proto/channel.h"
#include "tests/support/ports.h"
#include "tests/worker/agent/fake_coordinator.h"

namespace cohort::agent {
namespace {

v1::RankEvent Log(int i) {
  v1::RankEvent e;
  e.mutable_rank()->set_job_id("job-1");
  e.mutable_log()->set_text(std::to_string(i));
  return e;
}

v1::RankEvent Started() {
  v1::RankEvent e;
  e.mutable_rank()->set_job_id("job-1");
  e.mutable_started()->set_steps_per_epoch(5);
  return e;
}

TEST_CASE("events reach the coordinator in order", "[agent][forwarder]") {
  testing::FakeCoordinator coordinator;
  auto stub = coordinator.WorkerStub();
  EventForwarder forwarder(stub.get(), {});
  for (int i = 0; i < 100; ++i) forwarder.Push(Log(i));
  REQUIRE(coordinator.WaitFor([](const auto& s) { return s.events.size() == 100; }));
  auto events = coordinator.With([](auto& s) { return s.events; });
  for (int i = 0; i < 100; ++i) CHECK(events[i].log().text() == std::to_string(i));
  CHECK(forwarder.dropped() == 0);
}

TEST_CASE("a stream ended after a quiet spell is opened again for the next event",
          "[agent][forwarder]") {
  testing::FakeCoordinator coordinator;
  auto stub = coordinator.WorkerStub();
  EventForwarder forwarder(stub.get(), {});
  forwarder.Push(Log(1));
  REQUIRE(coordinator.WaitFor([](const auto& s) { return s.events.size() == 1; }));
  // The quiet stream is really ended (not merely still open for the next event).
  REQUIRE(coordinator.WaitFor([](const auto& s) { return s.event_streams_ended == 1; }));
  forwarder.Push(Log(2));
  REQUIRE(coordinator.WaitFor([](const auto& s) { return s.events.size() == 2; }));
}

TEST_CASE("events pushed while the coordinator is away arrive once it is back",
          "[agent][forwarder]") {
  int port = testing::FreePort();
  auto stub = v1::WorkerService::NewStub(
      CreateCoordinatorChannel(HostPort{"127.0.0.1", static_cast<uint16_t>(port)}));
  EventForwarder::Options options;
  options.max_backoff = absl::Milliseconds(200);
  EventForwarder forwarder(stub.get(), options);
  {
    // A first coordinator takes some events, then goes away.
    testing::FakeCoordinator first(port);
    forwarder.Push(Log(0));
    REQUIRE(first.WaitFor([](const auto& s) { return s.events.size() == 1; }));
  }
  absl::Time start = absl::Now();
  for (int i = 1; i <= 20; ++i) forwarder.Push(Log(i));  // Push never blocks
  CHECK(absl::Now() - start < absl::Milliseconds(100));
  absl::SleepFor(absl::Milliseconds(500));
  testing::FakeCoordinator second(port);
  REQUIRE(second.WaitFor([](const auto& s) {
    return !s.events.empty() && s.events.back().log().text() == "20";
  }));
  auto events = second.With([](auto& s) { return s.events; });
  CHECK(events.size() == 20);  // the ones pushed while away: none lost, no duplicate
}

TEST_CASE("a full queue drops progress and logs, never started", "[agent][forwarder]") {
  // Nothing listens: the queue fills.
  int port = testing::FreePort();
  auto stub = v1::WorkerService::NewStub(
      CreateCoordinatorChannel(HostPort{"127.0.0.1", static_cast<uint16_t>(port)}));
  EventForwarder::Options options;
  options.max_queued = 10;
  options.max_backoff = absl::Milliseconds(200);
  EventForwarder forwarder(stub.get(), options);
  for (int i = 0; i < 30; ++i) forwarder.Push(Log(i));
  forwarder.Push(Started());
  CHECK(forwarder.dropped() >= 19);
  testing::FakeCoordinator coordinator(port);
  REQUIRE(coordinator.WaitFor([](const auto& s) {
    return !s.events.empty() && s.events.back().has_started();
  }));
  absl::Time start = absl::Now();
  forwarder.Stop(absl::Seconds(2));
  CHECK(absl::Now() - start < absl::Seconds(3));
}

TEST_CASE("Stop ends at its deadline when the coordinator never answers", "[agent][forwarder]") {
  int port = testing::FreePort();
  auto stub = v1::WorkerService::NewStub(
      CreateCoordinatorChannel(HostPort{"127.0.0.1", static_cast<uint16_t>(port)}));
  EventForwarder forwarder(stub.get(), {});
  forwarder.Push(Log(1));
  absl::Time start = absl::Now();
  forwarder.Stop(absl::Milliseconds(500));
  CHECK(absl::Now() - start < absl::Seconds(4));
  forwarder.Push(Log(2));  // dropped silently after Stop
}

}  // namespace
}  // namespace cohort::agent
