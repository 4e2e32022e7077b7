#pragma once

// Authorizer: who is calling, and may they (docs/security.md).
//
// Every RPC handler of JobService, ClusterService and WorkerService starts with
// Authorize(context, api) and returns its error when it fails; nothing else in the
// coordinator decides who may call what. (A gRPC server interceptor cannot refuse a
// call, and gRPC's AuthMetadataProcessor runs only on TLS ports, while tokens must also
// work on plaintext loopback.) grpc.health.v1 and server reflection are gRPC's own
// services and stay open: probes need no token, and the schema is public.
//
// With a TokenTable, a call must carry "authorization: Bearer <token>" metadata:
//   no token, a malformed header, an unknown token     UNAUTHENTICATED
//   a role that may not call the service               PERMISSION_DENIED
// Roles and services:
//   JobService, ClusterService    user, admin
//   WorkerService                 worker (and, with worker_client_cert, only over a
//                                 TLS connection with a verified client certificate)
// Without a TokenTable (the loopback default) every call is Caller{"local", admin}.
//
// Tenancy on top (CheckJobAccess): a user sees and acts on the jobs it owns, an admin
// on every job. Messages never contain a token. Immutable: any thread.

#include <optional>

#include <grpcpp/server_context.h>

#include "absl/status/statusor.h"
#include "cohort/v1/types.pb.h"
#include "server/token_table.h"

namespace cohort::server {

enum class Api { kJobs, kCluster, kWorkers };

// The identity calls are made as when authentication is off.
inline constexpr absl::string_view kLocalIdentity = "local";

class Authorizer {
 public:
  // `tokens` nullopt: authentication off. `worker_client_cert`: WorkerService needs a
  // verified TLS client certificate too (--tls-client-ca).
  explicit Authorizer(std::optional<TokenTable> tokens = std::nullopt,
                      bool worker_client_cert = false)
      : tokens_(std::move(tokens)), worker_client_cert_(worker_client_cert) {}

  absl::StatusOr<Caller> Authorize(const grpc::ServerContext& context, Api api) const;
  bool enabled() const { return tokens_.has_value(); }

 private:
  const std::optional<TokenTable> tokens_;
  const bool worker_client_cert_;
};

// OK when `caller` owns `job` or is an admin; else PERMISSION_DENIED naming the job.
absl::Status CheckJobAccess(const Caller& caller, const v1::Job& job);

}  // namespace cohort::server
