#include "common/duration.h"

#include <catch2/catch.hpp>

namespace cohort {
namespace {

TEST_CASE("ParsePositiveDuration takes units and refuses the rest", "[common]") {
  CHECK(*ParsePositiveDuration("10s", "--x") == absl::Seconds(10));
  CHECK(*ParsePositiveDuration("500ms", "--x") == absl::Milliseconds(500));
  CHECK(*ParsePositiveDuration("1h30m", "--x") == absl::Minutes(90));
  for (const char* bad : {"10", "0", "0s", "-1s", "inf", "soon", ""}) {
    auto r = ParsePositiveDuration(bad, "--lease-ttl");
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(std::string(r.status().message()).rfind("--lease-ttl: ", 0) == 0);
  }
}

}  // namespace
}  // namespace cohort
