#pragma once

// The one place where absl::Status meets grpc::Status (DESIGN.md, "Errors").
//
// Status codes map one to one (both follow google.rpc.Code); messages pass unchanged,
// so they must already be safe to show users.

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace cohort {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace cohort
