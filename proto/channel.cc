#include "proto/channel.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/client_interceptor.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace cohort {
namespace {

// Adds the bearer token to every call's initial metadata.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;  // owned by the factory, which the channel keeps
};

class TokenInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

absl::StatusOr<std::string> ReadSecurityFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, " ", path, ": cannot read the file (missing, or not readable)"));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

absl::StatusOr<ChannelSecurity> LoadChannelSecurity(const ChannelSecurityFiles& files) {
  ChannelSecurity out;
  out.token = std::string(absl::StripAsciiWhitespace(files.token));
  if (out.token.empty() && !files.token_file.empty()) {
    absl::StatusOr<std::string> text = ReadSecurityFile(files.token_file, "--token-file");
    if (!text.ok()) return text.status();
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      line = absl::StripAsciiWhitespace(line);
      if (!line.empty()) {
        out.token = std::string(line);
        break;
      }
    }
    if (out.token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token-file ", files.token_file, ": the file holds no token"));
    }
  }
  for (char c : out.token) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          "the token has a blank or a non-printable character (expected one word of printable ASCII)");
    }
  }
  if (files.tls_cert.empty() != files.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both or neither");
  }
  if (!files.tls_cert.empty() && files.tls_ca.empty()) {
    return absl::InvalidArgumentError("--tls-cert needs --tls-ca (the CA that signed the coordinator's certificate)");
  }
  if (!files.tls_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadSecurityFile(files.tls_ca, "--tls-ca");
    if (!ca.ok()) return ca.status();
    out.ca_pem = *std::move(ca);
  }
  if (!files.tls_cert.empty()) {
    absl::StatusOr<std::string> cert = ReadSecurityFile(files.tls_cert, "--tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadSecurityFile(files.tls_key, "--tls-key");
    if (!key.ok()) return key.status();
    out.cert_pem = *std::move(cert);
    out.key_pem = *std::move(key);
  }
  if (!files.tls_server_name.empty() && files.tls_ca.empty()) {
    return absl::InvalidArgumentError("--tls-server-name needs --tls-ca");
  }
  out.server_name = files.tls_server_name;
  return out;
}

std::shared_ptr<grpc::Channel> CreateCoordinatorChannel(const HostPort& coordinator,
                                                        const ChannelSecurity& security) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetMaxReceiveMessageSize(kMaxReplyBytes);
  args.SetMaxSendMessageSize(kMaxRequestBytes);
  // Coordinator traffic stays inside the cluster: an http_proxy meant for the outside
  // world must not capture it.
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!security.ca_pem.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = security.ca_pem;
    tls.pem_cert_chain = security.cert_pem;
    tls.pem_private_key = security.key_pem;
    credentials = grpc::SslCredentials(tls);
    if (!security.server_name.empty()) {
      args.SetSslTargetNameOverride(security.server_name);
    }
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!security.token.empty()) {
    interceptors.push_back(std::make_unique<TokenInterceptorFactory>(security.token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      coordinator.ToString(), credentials, args, std::move(interceptors));
}

std::unique_ptr<grpc::ClientContext> ContextWithDeadline(absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  return context;
}

}  // namespace cohort
