#pragma once

// A raw HTTP exchange with a server on loopback, for the tests of the metrics endpoints:
// sends `request` as it is (so tests can send malformed ones) and returns everything
// the server wrote until it closed the connection, or "" when it could not connect.

#include <string>

#include "absl/time/time.h"

namespace cohort::testing {

std::string HttpExchange(int port, const std::string& request,
                         absl::Duration timeout = absl::Seconds(10));

// GET `path` with HTTP/1.1; the whole response (status line, headers, body).
std::string HttpGet(int port, const std::string& path);

// The body of a response (after the blank line), or "".
std::string HttpBody(const std::string& response);

}  // namespace cohort::testing
