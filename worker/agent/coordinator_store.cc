#include "worker/agent/coordinator_store.h"

#include <algorithm>
#include <cstdlib>

#include <grpcpp/client_context.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "proto/channel.h"
#include "proto/grpc_status.h"
#include "proto/time_convert.h"

namespace cohort::agent {
namespace {

constexpr absl::string_view kScheme = "coordinator://";

absl::Status BadUrl(absl::string_view url, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--rendezvous: '", url, "' ", why,
                                                 "; expected coordinator://HOST:PORT/JOB_ID/ATTEMPT"));
}

// Calls `attempt` until it returns something other than UNAVAILABLE or `deadline`
// passes (then the last UNAVAILABLE is returned).
template <typename Attempt>
auto RetryUnavailable(absl::Time deadline, Attempt attempt) -> decltype(attempt()) {
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    auto result = attempt();
    absl::Status status;
    if constexpr (std::is_same_v<decltype(result), absl::Status>) {
      status = result;
    } else {
      status = result.status();
    }
    if (!absl::IsUnavailable(status) || absl::Now() + backoff >= deadline) return result;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

}  // namespace

namespace {

// Variable, and the member of ChannelSecurityFiles it carries.
constexpr std::pair<const char*, std::string ChannelSecurityFiles::*> kSecurityVariables[] = {
    {"COHORT_TOKEN_FILE", &ChannelSecurityFiles::token_file},
    {"COHORT_TLS_CA", &ChannelSecurityFiles::tls_ca},
    {"COHORT_TLS_CERT", &ChannelSecurityFiles::tls_cert},
    {"COHORT_TLS_KEY", &ChannelSecurityFiles::tls_key},
    {"COHORT_TLS_SERVER_NAME", &ChannelSecurityFiles::tls_server_name},
};

}  // namespace

std::map<std::string, std::string> SecurityEnvironment(const ChannelSecurityFiles& files) {
  std::map<std::string, std::string> env;
  for (const auto& [name, member] : kSecurityVariables) {
    if (!(files.*member).empty()) env[name] = files.*member;
  }
  return env;
}

ChannelSecurityFiles SecurityFilesFromEnvironment() {
  ChannelSecurityFiles files;
  for (const auto& [name, member] : kSecurityVariables) {
    const char* value = std::getenv(name);
    if (value != nullptr) files.*member = value;
  }
  return files;
}

bool IsCoordinatorRendezvous(absl::string_view url) { return absl::StartsWith(url, kScheme); }

absl::StatusOr<CoordinatorRendezvous> ParseCoordinatorRendezvous(absl::string_view url) {
  if (!absl::StartsWith(url, kScheme)) return BadUrl(url, "is not a coordinator:// URL");
  absl::string_view rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  if (slash == absl::string_view::npos) return BadUrl(url, "names no job attempt");
  absl::StatusOr<HostPort> address = ParseHostPort(rest.substr(0, slash));
  if (!address.ok()) return BadUrl(url, absl::StrCat("has a bad address: ", address.status().message()));
  absl::string_view ns = rest.substr(slash + 1);
  size_t second = ns.find('/');
  if (second == absl::string_view::npos || second == 0) return BadUrl(url, "names no job attempt");
  int attempt = 0;
  if (!absl::SimpleAtoi(ns.substr(second + 1), &attempt) || attempt < 1) {
    return BadUrl(url, "has no positive attempt number");
  }
  return CoordinatorRendezvous{*address, std::string(ns)};
}

std::string CoordinatorRendezvousUrl(const HostPort& coordinator, absl::string_view ns) {
  return absl::StrCat(kScheme, coordinator.ToString(), "/", ns);
}

CoordinatorStore::CoordinatorStore(std::unique_ptr<v1::WorkerService::StubInterface> stub,
                                   std::string ns, Options options)
    : stub_(std::move(stub)), ns_(std::move(ns)), options_(options) {}

absl::StatusOr<std::unique_ptr<CoordinatorStore>> CoordinatorStore::Open(
    absl::string_view url, Options options, const ChannelSecurity& security) {
  absl::StatusOr<CoordinatorRendezvous> parsed = ParseCoordinatorRendezvous(url);
  if (!parsed.ok()) return parsed.status();
  return std::make_unique<CoordinatorStore>(
      v1::WorkerService::NewStub(CreateCoordinatorChannel(parsed->coordinator, security)),
      parsed->ns, options);
}

absl::Status CoordinatorStore::Set(absl::string_view key, absl::string_view value) {
  if (key.empty()) return absl::InvalidArgumentError("rendezvous: empty key");
  v1::RendezvousSetRequest request;
  request.set_namespace_(ns_);
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  return RetryUnavailable(absl::Now() + options_.retry_for, [&]() -> absl::Status {
    v1::RendezvousSetResponse response;
    auto context = ContextWithDeadline(options_.rpc_timeout);
    return FromGrpcStatus(stub_->RendezvousSet(context.get(), request, &response));
  });
}

absl::StatusOr<std::vector<std::string>> CoordinatorStore::Get(const std::vector<std::string>& keys,
                                                               absl::Duration timeout) {
  for (const std::string& key : keys) {
    if (key.empty()) return absl::InvalidArgumentError("rendezvous: empty key");
  }
  timeout = std::max(timeout, absl::ZeroDuration());
  const absl::Time deadline = absl::Now() + timeout;
  return RetryUnavailable(
      deadline, [&]() -> absl::StatusOr<std::vector<std::string>> {
        v1::RendezvousGetRequest request;
        request.set_namespace_(ns_);
        for (const std::string& key : keys) request.add_keys(key);
        // What is left of the caller's timeout (a retry must not extend it).
        ToProto(std::max(deadline - absl::Now(), absl::ZeroDuration()), request.mutable_timeout());
        v1::RendezvousGetResponse response;
        auto context = ContextWithDeadline(FromProto(request.timeout()) + options_.get_margin);
        absl::Status status = FromGrpcStatus(stub_->RendezvousGet(context.get(), request, &response));
        if (!status.ok()) {
          if (absl::IsDeadlineExceeded(status) && status.message().empty()) {
            return absl::DeadlineExceededError(absl::StrCat(
                "rendezvous: keys ", absl::StrJoin(keys, ", "), " missing after ",
                absl::FormatDuration(timeout)));
          }
          return status;
        }
        if (response.values_size() != static_cast<int>(keys.size())) {
          return absl::InternalError(absl::StrCat("rendezvous: the coordinator answered ",
                                                  response.values_size(), " values for ",
                                                  keys.size(), " keys"));
        }
        return std::vector<std::string>(response.values().begin(), response.values().end());
      });
}

}  // namespace cohort::agent
