#pragma once

// How the client talks to the coordinator: every call carries a deadline, and a failed
// call becomes one line on stderr and an exit code (client/exit_codes.h).

#include <grpcpp/client_context.h>

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "common/address.h"
#include "proto/channel.h"
#include "grpcpp/support/status.h"

namespace cohort::client {

struct Connection {
  HostPort coordinator;
  absl::Duration timeout = absl::Seconds(5);
  ChannelSecurity security;  // --token, --tls-ca, ... (docs/security.md)
};

// A context whose deadline is `timeout` from now.
std::unique_ptr<grpc::ClientContext> NewCallContext(const Connection& connection);

// Prints "cohort: error: ..." for a failed call and returns the exit code:
// kExitUnreachable when the coordinator could not be reached in time, else kExitFailed.
int ReportCallError(const Connection& connection, const grpc::Status& status);

// A JobService stub on a channel of its own to the coordinator (with the connection's
// token and TLS settings, as every channel the client opens).
std::unique_ptr<v1::JobService::Stub> NewJobStub(const Connection& connection);

// GetJob of `job_id`, with the connection's deadline.
grpc::Status GetJob(const Connection& connection, v1::JobService::Stub& stub,
                    const std::string& job_id, v1::Job* job);

}  // namespace cohort::client
