#pragma once

// Checks that an address can be listened on, so a busy port or an unknown host is
// reported as such (gRPC only says that it failed). The socket is closed again; a race
// with another process remains possible and is then reported by gRPC.

#include "absl/status/status.h"
#include "common/address.h"

namespace cohort::server {

absl::Status CheckCanListen(const HostPort& address);

// True when every address `host` resolves to is a loopback one (127.0.0.0/8, ::1).
bool IsLoopbackHost(const std::string& host);

// The --insecure rule (docs/security.md): a --listen address that is not loopback needs
// authentication (`tokens`) and TLS (`tls`), or `insecure`; INVALID_ARGUMENT saying
// which is missing and what to give otherwise.
absl::Status CheckListenSecurity(const HostPort& address, bool tokens, bool tls, bool insecure);

}  // namespace cohort::server
