#pragma once

// The gRPC channel from a client or an agent to the coordinator. Reconnects quickly
// (backoff capped at 2 s) so an agent finds a restarted coordinator within a heartbeat
// or two rather than after gRPC's default two-minute backoff. Ignores http_proxy.

#include <grpcpp/channel.h>

#include <memory>

#include "common/address.h"

namespace cohort {

// shared_ptr: gRPC's stubs share ownership of their channel.
std::shared_ptr<grpc::Channel> CreateCoordinatorChannel(const HostPort& coordinator);

}  // namespace cohort
