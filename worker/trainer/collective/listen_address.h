#pragma once

// The address a Gloo-backend rank listens on (internal to the backend): gloo's pairs and
// the TCP ring both listen there, so it is resolved, and refused, in one place.

#include <sys/socket.h>

#include "absl/status/statusor.h"
#include "worker/trainer/collective/gloo_collective.h"

namespace cohort::trainer::collective {

struct ListenAddress {
  sockaddr_storage addr{};  // port 0: the kernel picks one
  socklen_t len = 0;
};

// `options.interface`'s first address (IPv4 before IPv6) when set, else the first
// address `options.hostname` resolves to. INVALID_ARGUMENT naming the interface or the
// name when there is none ("gloo: network interface \"eth9\" does not exist or has no
// IP address"): gloo's own lookup trusts its input, and crashes on a name that does not
// resolve.
absl::StatusOr<ListenAddress> ResolveListenAddress(const GlooOptions& options);

}  // namespace cohort::trainer::collective
