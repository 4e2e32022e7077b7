#pragma once

// The gRPC channel from a client or an agent to the coordinator. Reconnects quickly
// (backoff capped at 2 s) so an agent finds a restarted coordinator within a heartbeat
// or two rather than after gRPC's default two-minute backoff. Ignores http_proxy.

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <memory>

#include "absl/time/time.h"
#include "common/address.h"

namespace cohort {

// shared_ptr: gRPC's stubs share ownership of their channel.
std::shared_ptr<grpc::Channel> CreateCoordinatorChannel(const HostPort& coordinator);

// A context for one call whose deadline is `timeout` from now: every call to the
// coordinator carries one, so none waits forever.
std::unique_ptr<grpc::ClientContext> ContextWithDeadline(absl::Duration timeout);

}  // namespace cohort
