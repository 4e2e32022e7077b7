#pragma once

// Network addresses as the binaries take them on the command line: "HOST:PORT", with
// IPv6 hosts in brackets ("[::1]:7070"). Parsing checks the form and the port range;
// it does not resolve names.

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace cohort {

struct HostPort {
  std::string host;  // without brackets
  uint16_t port = 0;

  // "host:port", bracketing IPv6 hosts, as gRPC and humans expect it.
  std::string ToString() const;
  // True for localhost, 127.0.0.0/8 and ::1.
  bool IsLoopback() const;
};

// `allow_port_zero` admits port 0 ("pick a free one") where listening allows it.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text, bool allow_port_zero = false);

}  // namespace cohort
