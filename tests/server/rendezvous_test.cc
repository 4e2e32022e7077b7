#include "server/rendezvous.h"

#include <catch2/catch.hpp>

#include <thread>

namespace cohort::server {
namespace {

TEST_CASE("Rendezvous Get blocks until every key is set", "[server][rendezvous]") {
  Rendezvous r;
  const std::string ns = Rendezvous::Namespace("job-1", 2);
  CHECK(ns == "job-1/2");
  r.Open(ns);
  REQUIRE(r.Set(ns, "a", "1").ok());
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(100));
    CHECK(r.Set(ns, "b", "2").ok());
  });
  absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::string>> got = r.Get(ns, {"b", "a"}, absl::Seconds(10));
  setter.join();
  REQUIRE(got.ok());
  CHECK(*got == std::vector<std::string>{"2", "1"});
  CHECK(absl::Now() - start >= absl::Milliseconds(90));
}

TEST_CASE("Rendezvous Get times out naming the missing keys", "[server][rendezvous]") {
  Rendezvous r;
  r.Open("job-1/1");
  REQUIRE(r.Set("job-1/1", "a", "1").ok());
  absl::StatusOr<std::vector<std::string>> got =
      r.Get("job-1/1", {"a", "rank1", "rank2"}, absl::Milliseconds(50));
  CHECK(got.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(got.status().message() == "rendezvous 'job-1/1': keys not set within 50ms: rank1, rank2");
}

TEST_CASE("Rendezvous Drop aborts blocked readers and ended namespaces refuse", "[server][rendezvous]") {
  Rendezvous r;
  r.Open("job-7/3");
  std::thread dropper([&] {
    absl::SleepFor(absl::Milliseconds(50));
    r.Drop("job-7/3");
  });
  absl::StatusOr<std::vector<std::string>> got = r.Get("job-7/3", {"x"}, absl::Seconds(30));
  dropper.join();
  CHECK(got.status().code() == absl::StatusCode::kAborted);
  CHECK(got.status().message() == "attempt 3 of job job-7 has ended");
  CHECK(r.Set("job-7/3", "x", "1").message() == "attempt 3 of job job-7 has ended");
  CHECK(r.Get("job-9/1", {"x"}, absl::Seconds(1)).status().code() == absl::StatusCode::kAborted);
  CHECK(r.Set("job-7/3", "", "1").code() == absl::StatusCode::kInvalidArgument);
  CHECK(r.Get("job-7/3", {}, absl::Seconds(1)).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Rendezvous Close wakes every reader and refuses later calls", "[server][rendezvous]") {
  Rendezvous r;
  r.Open("j/1");
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    r.Close();
  });
  CHECK(r.Get("j/1", {"k"}, absl::Seconds(30)).status().code() == absl::StatusCode::kAborted);
  closer.join();
  r.Open("j/2");
  CHECK(r.Set("j/2", "k", "v").code() == absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace cohort::server
