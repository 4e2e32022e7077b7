#include "worker/trainer/collective/listen_address.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cohort::trainer::collective {

absl::StatusOr<ListenAddress> ResolveListenAddress(const GlooOptions& options) {
  ListenAddress out;
  if (!options.interface.empty()) {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) {
      return absl::UnavailableError(absl::StrCat("gloo: getifaddrs: ", std::strerror(errno)));
    }
    for (int family : {AF_INET, AF_INET6}) {
      for (ifaddrs* ifa = list; ifa != nullptr && out.len == 0; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != family ||
            options.interface != ifa->ifa_name) {
          continue;
        }
        out.len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
        std::memcpy(&out.addr, ifa->ifa_addr, out.len);
      }
    }
    ::freeifaddrs(list);
    if (out.len == 0) {
      return absl::InvalidArgumentError(absl::StrCat("gloo: network interface \"", options.interface,
                                                     "\" does not exist or has no IP address"));
    }
    if (out.addr.ss_family == AF_INET) reinterpret_cast<sockaddr_in&>(out.addr).sin_port = 0;
    if (out.addr.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6&>(out.addr).sin6_port = 0;
    return out;
  }
  if (options.hostname.empty()) {
    return absl::InvalidArgumentError("gloo: set the hostname or the interface to listen on");
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (int rv = ::getaddrinfo(options.hostname.c_str(), "0", &hints, &result); rv != 0) {
    return absl::InvalidArgumentError(absl::StrCat("gloo: cannot resolve address \"",
                                                   options.hostname, "\": ", gai_strerror(rv)));
  }
  std::memcpy(&out.addr, result->ai_addr, result->ai_addrlen);
  out.len = result->ai_addrlen;
  ::freeaddrinfo(result);
  return out;
}

}  // namespace cohort::trainer::collective
