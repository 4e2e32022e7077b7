#include "common/address.h"

#include <catch2/catch.hpp>

namespace cohort {
namespace {

TEST_CASE("ParseHostPort reads host:port and bracketed IPv6", "[common]") {
  auto a = ParseHostPort("127.0.0.1:7070");
  REQUIRE(a.ok());
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 7070);
  CHECK(a->IsLoopback());
  CHECK(a->ToString() == "127.0.0.1:7070");

  auto b = ParseHostPort("[::1]:80");
  REQUIRE(b.ok());
  CHECK(b->host == "::1");
  CHECK(b->ToString() == "[::1]:80");
  CHECK(b->IsLoopback());

  auto c = ParseHostPort("coordinator.cohort.svc:7070");
  REQUIRE(c.ok());
  CHECK_FALSE(c->IsLoopback());
}

TEST_CASE("ParseHostPort refuses malformed addresses with a clear message", "[common]") {
  for (const char* bad : {"", "nohost", ":80", "host:", "host:abc", "host:70000", "::1:80",
                          "[::1", "[::1]80"}) {
    auto r = ParseHostPort(bad);
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(r.status().message()).find("expected HOST:PORT") != std::string::npos);
  }
  CHECK_FALSE(ParseHostPort("host:0").ok());
  CHECK(ParseHostPort("host:0", /*allow_port_zero=*/true).ok());
}

}  // namespace
}  // namespace cohort
