#include "server/listen_check.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cohort::server {

absl::Status CheckCanListen(const HostPort& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string port = std::to_string(address.port);
  int rc = getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--listen ", address.ToString(),
                                                   ": cannot resolve host: ", gai_strerror(rc)));
  }
  absl::Status status = absl::OkStatus();
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      status = absl::UnavailableError(absl::StrCat("cannot listen on ", address.ToString(), ": ",
                                                   std::strerror(errno)));
    }
    close(fd);
    if (!status.ok()) break;
  }
  freeaddrinfo(found);
  return status;
}

bool IsLoopbackHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), "0", &hints, &found) != 0) return false;
  bool loopback = found != nullptr;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      auto* in = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
      loopback = loopback && (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (ai->ai_family == AF_INET6) {
      auto* in6 = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
      loopback = loopback && IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    } else {
      loopback = false;
    }
  }
  freeaddrinfo(found);
  return loopback;
}

absl::Status CheckListenSecurity(const HostPort& address, bool tokens, bool tls, bool insecure) {
  if (insecure || IsLoopbackHost(address.host)) return absl::OkStatus();
  if (!tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen ", address.ToString(),
        " is not a loopback address and there is no --token-file: anyone who reaches the "
        "port could submit jobs and run code on the workers. Give --token-file (and "
        "--tls-cert/--tls-key), or --insecure to serve it without authentication anyway"));
  }
  if (!tls) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen ", address.ToString(),
        " is not a loopback address and there is no --tls-cert/--tls-key: tokens would "
        "cross the network in clear. Give --tls-cert and --tls-key, or --insecure to "
        "serve it in plaintext anyway"));
  }
  return absl::OkStatus();
}

}  // namespace cohort::server
