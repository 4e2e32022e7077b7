#pragma once

// The gRPC channel from a client or an agent to the coordinator. Reconnects quickly
// (backoff capped at 2 s) so an agent finds a restarted coordinator within a heartbeat
// or two rather than after gRPC's default two-minute backoff. Ignores http_proxy.
//
// Security (docs/security.md): with `tls.ca_pem` set the channel speaks TLS and checks
// the coordinator's certificate against that CA (and presents `tls.cert_pem`/`key_pem`
// when set, for mutual TLS); with `token` set, every call made on the channel carries
// "authorization: Bearer <token>" (added by a client interceptor, so it also works on
// plaintext loopback, where gRPC's call credentials refuse to travel).

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <climits>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/address.h"

namespace cohort {

struct ChannelSecurity {
  std::string token;            // empty: calls carry no token
  std::string ca_pem;           // empty: plaintext
  std::string cert_pem;         // with key_pem: this side's certificate (mutual TLS)
  std::string key_pem;
  std::string server_name;      // the name the certificate must carry; empty: the host
};

// Reads the files a binary's flags name into a ChannelSecurity. `token_file` holds the
// token on its first non-empty line (surrounding blanks ignored); `token` is used as is
// and wins over the file. An empty path is not read. Errors name the flag and the file.
struct ChannelSecurityFiles {
  std::string token;
  std::string token_file;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
};
absl::StatusOr<ChannelSecurity> LoadChannelSecurity(const ChannelSecurityFiles& files);

// A whole file's bytes; FAILED_PRECONDITION "<flag> <path>: <why>" when it cannot be read.
absl::StatusOr<std::string> ReadSecurityFile(const std::string& path, const std::string& flag);

// gRPC message limits, set explicitly on both ends rather than left to gRPC's defaults
// (docs/job-server.md). Replies (a job list, an event batch, a 1 MiB download chunk)
// stay under kMaxReplyBytes: the coordinator sends no more and channels accept no
// more. Requests may be as large as the coordinator accepts (--max-model-bytes + 1 MiB,
// a job may carry its .keras inline): channels send up to kMaxRequestBytes and the
// coordinator refuses, with RESOURCE_EXHAUSTED, what is past its own limit.
inline constexpr int kMaxReplyBytes = 64 << 20;
inline constexpr int kMaxRequestBytes = INT32_MAX;

// shared_ptr: gRPC's stubs share ownership of their channel.
std::shared_ptr<grpc::Channel> CreateCoordinatorChannel(const HostPort& coordinator,
                                                        const ChannelSecurity& security = {});

// A context for one call whose deadline is `timeout` from now: every call to the
// coordinator carries one, so none waits forever.
std::unique_ptr<grpc::ClientContext> ContextWithDeadline(absl::Duration timeout);

}  // namespace cohort
