#include "server/auth.h"

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"

namespace cohort::server {
namespace {

absl::string_view ServiceName(Api api) {
  switch (api) {
    case Api::kJobs: return "JobService";
    case Api::kCluster: return "ClusterService";
    case Api::kWorkers: return "WorkerService";
  }
  return "?";
}

bool Allowed(Role role, Api api) {
  switch (api) {
    case Api::kJobs:
    case Api::kCluster:
      return role == Role::kUser || role == Role::kAdmin;
    case Api::kWorkers:
      return role == Role::kWorker;
  }
  return false;
}

absl::string_view AllowedRoles(Api api) {
  return api == Api::kWorkers ? "the worker role" : "the user and admin roles";
}

}  // namespace

absl::StatusOr<Caller> Authorizer::Authorize(const grpc::ServerContext& context, Api api) const {
  if (!tokens_) return Caller{std::string(kLocalIdentity), Role::kAdmin};
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "no token: this coordinator requires 'authorization: Bearer <token>' metadata "
        "(cohort --token, COHORT_TOKEN or COHORT_TOKEN_FILE; cohort-worker --token-file)");
  }
  absl::string_view header(it->second.data(), it->second.size());
  absl::string_view token = header;
  if (!absl::ConsumePrefix(&token, "Bearer ") && !absl::ConsumePrefix(&token, "bearer ")) {
    return absl::UnauthenticatedError("the authorization metadata is not of the form 'Bearer <token>'");
  }
  token = absl::StripAsciiWhitespace(token);
  std::optional<Caller> caller = tokens_->Find(token);
  if (!caller) {
    spdlog::debug("refused a call to {} from {}: unknown token", std::string(ServiceName(api)), context.peer());
    return absl::UnauthenticatedError("the token is not valid for this coordinator");
  }
  if (!Allowed(caller->role, api)) {
    spdlog::debug("refused a call to {} from '{}' (role {})", std::string(ServiceName(api)),
                  caller->identity, std::string(RoleName(caller->role)));
    return absl::PermissionDeniedError(absl::StrCat(
        "'", caller->identity, "' has role ", RoleName(caller->role), ", which may not call ",
        ServiceName(api), " (", AllowedRoles(api), " may)"));
  }
  if (api == Api::kWorkers && worker_client_cert_) {
    std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
    if (!auth || !auth->IsPeerAuthenticated()) {
      return absl::PermissionDeniedError(absl::StrCat(
          "'", caller->identity,
          "' called WorkerService without a TLS client certificate; this coordinator "
          "requires one from agents (--tls-client-ca): start cohort-worker with --tls-cert/--tls-key"));
    }
  }
  return *std::move(caller);
}

absl::Status CheckJobAccess(const Caller& caller, const v1::Job& job) {
  if (caller.role == Role::kAdmin || job.owner() == caller.identity) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("job '", job.id(), "' belongs to another user; '", caller.identity,
                   "' may only see and change its own jobs"));
}

}  // namespace cohort::server
