#include "common/metrics/http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace cohort::metrics {
namespace {

absl::Status Unavailable(const HostPort& address, absl::string_view what, int err) {
  return absl::UnavailableError(absl::StrCat("--metrics-listen ", address.ToString(), ": ", what,
                                             ": ", std::strerror(err)));
}

std::string Response(absl::string_view status, absl::string_view extra_headers,
                     absl::string_view content_type, const std::string& body, bool head_only) {
  std::string out = absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                                 "\r\nContent-Length: ", body.size(), "\r\n", extra_headers,
                                 "Connection: close\r\n\r\n");
  if (!head_only) out += body;
  return out;
}

std::string Plain(absl::string_view status, absl::string_view extra_headers = "") {
  return Response(status, extra_headers, "text/plain; charset=utf-8",
                  absl::StrCat(status, "\n"), false);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const HttpServerOptions& options, std::function<std::string()> render) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port = std::to_string(options.listen.port);
  const char* host = options.listen.host.empty() ? nullptr : options.listen.host.c_str();
  if (int rc = getaddrinfo(host, port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("--metrics-listen ", options.listen.ToString(),
                                               ": cannot resolve: ", gai_strerror(rc)));
  }
  int fd = -1, err = 0;
  const char* failed = "no address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno, failed = "socket";
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno, failed = "cannot bind";
    } else if (listen(fd, 16) != 0) {
      err = errno, failed = "cannot listen";
    } else {
      break;
    }
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) return Unavailable(options.listen, failed, err);

  sockaddr_storage bound = {};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  uint16_t actual = ntohs(bound.ss_family == AF_INET6
                              ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    err = errno;
    close(fd);
    return Unavailable(options.listen, "pipe", err);
  }
  std::unique_ptr<MetricsHttpServer> server(
      new MetricsHttpServer(options, std::move(render), fd, wake[0], wake[1], actual));
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

MetricsHttpServer::MetricsHttpServer(const HttpServerOptions& options,
                                     std::function<std::string()> render, int listen_fd,
                                     int wake_read, int wake_write, uint16_t port)
    : options_(options),
      render_(std::move(render)),
      listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      port_(port) {}

MetricsHttpServer::~MetricsHttpServer() {
  Stop();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
}

void MetricsHttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  char byte = 1;
  while (write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  if (thread_.joinable()) thread_.join();
}

void MetricsHttpServer::Serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;  // the client went away, or out of descriptors for a moment
    HandleConnection(fd);
    CloseGracefully(fd);
  }
}

bool MetricsHttpServer::ReadHead(int fd, std::string* head, bool* too_large) {
  absl::Time deadline = absl::Now() + options_.read_timeout;
  char buffer[1024];
  while (!absl::StrContains(*head, "\r\n\r\n") && !absl::StrContains(*head, "\n\n")) {
    if (head->size() > options_.max_request_bytes) {
      *too_large = true;
      return true;
    }
    int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) return false;
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (poll(fds, 2, static_cast<int>(left)) <= 0) continue;
    if (fds[1].revents != 0) return false;
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    head->append(buffer, static_cast<size_t>(n));
  }
  return true;
}

void MetricsHttpServer::WriteAll(int fd, const std::string& data) {
  absl::Time deadline = absl::Now() + options_.read_timeout;
  size_t done = 0;
  while (done < data.size()) {
    int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) return;
    pollfd fds[2] = {{fd, POLLOUT, 0}, {wake_read_, POLLIN, 0}};
    if (poll(fds, 2, static_cast<int>(left)) <= 0) continue;
    if (fds[1].revents != 0) return;
    ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Closing a socket with unread input makes the kernel send a reset, which can destroy
// the response before the client reads it (a request we refused early, a body we never
// read). So: end our side, then read and drop what the client still sends, briefly.
void MetricsHttpServer::CloseGracefully(int fd) {
  shutdown(fd, SHUT_WR);
  absl::Time deadline = absl::Now() + absl::Milliseconds(200);
  char buffer[4096];
  size_t drained = 0;
  while (drained < (size_t{1} << 20)) {
    int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) break;
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (poll(fds, 2, static_cast<int>(left)) <= 0 || fds[1].revents != 0) break;
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // the client closed too
    drained += static_cast<size_t>(n);
  }
  close(fd);
}

void MetricsHttpServer::HandleConnection(int fd) {
  std::string head;
  bool too_large = false;
  if (!ReadHead(fd, &head, &too_large)) return;
  if (too_large) {
    WriteAll(fd, Plain("431 Request Header Fields Too Large"));
    return;
  }
  absl::string_view line = absl::string_view(head).substr(0, head.find('\n'));
  if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
  std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.") || parts[1].empty() ||
      parts[1][0] != '/') {
    WriteAll(fd, Plain("400 Bad Request"));
    return;
  }
  absl::string_view method = parts[0], path = parts[1];
  path = path.substr(0, path.find('?'));
  if (path != "/metrics") {
    WriteAll(fd, Plain("404 Not Found"));
    return;
  }
  if (method != "GET" && method != "HEAD") {
    WriteAll(fd, Plain("405 Method Not Allowed", "Allow: GET, HEAD\r\n"));
    return;
  }
  WriteAll(fd, Response("200 OK", "", "text/plain; version=0.0.4; charset=utf-8", render_(),
                        method == "HEAD"));
}

}  // namespace cohort::metrics
