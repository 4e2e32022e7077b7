#pragma once

// Checks that an address can be listened on, so a busy port or an unknown host is
// reported as such (gRPC only says that it failed). The socket is closed again; a race
// with another process remains possible and is then reported by gRPC.

#include "absl/status/status.h"
#include "common/address.h"

namespace cohort::server {

absl::Status CheckCanListen(const HostPort& address);

}  // namespace cohort::server
