#include "server/listen_check.h"

#include <netdb.h>
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

}  // namespace cohort::server
