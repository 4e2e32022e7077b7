#include "worker/trainer/collective/tcp_ring.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "worker/trainer/collective/failure.h"
#include "worker/trainer/collective/listen_address.h"
#include "worker/trainer/collective/sum.h"

namespace cohort::trainer::collective {
namespace {

constexpr char kOp[] = "all-reduce";
constexpr char kConnecting[] = "connecting the ring";

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat("tcp ring: ", what, ": ", std::strerror(errno)));
}

// Closes a file descriptor when it goes out of scope, unless released.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Waits until `fd` is ready for `events`; DEADLINE_EXCEEDED once `deadline` passes.
absl::Status WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("timed out");
    pollfd p{fd, events, 0};
    int rv = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)))));
    if (rv > 0) return absl::OkStatus();
    if (rv < 0 && errno != EINTR) return Errno("poll");
  }
}

absl::Status SetNoDelayNonBlocking(int fd) {
  int on = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)) != 0) {
    return Errno("setsockopt TCP_NODELAY");
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return Errno("fcntl");
  return absl::OkStatus();
}

// Connects to `host port` (numeric, as published), retrying refusals until `deadline`.
absl::StatusOr<Fd> ConnectTo(const std::string& published, int peer, absl::Time deadline,
                             absl::Duration timeout) {
  std::vector<std::string> parts = absl::StrSplit(published, ' ');
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* result = nullptr;
  if (parts.size() != 2 ||
      ::getaddrinfo(parts[0].c_str(), parts[1].c_str(), &hints, &result) != 0) {
    return absl::InternalError(
        absl::StrCat("tcp ring: rank ", peer, " published a bad address \"", published, "\""));
  }
  sockaddr_storage addr{};
  std::memcpy(&addr, result->ai_addr, result->ai_addrlen);
  socklen_t len = result->ai_addrlen;
  int family = result->ai_family;
  ::freeaddrinfo(result);
  for (;;) {
    Fd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) return Errno("socket");
    int error = 0;
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
      if (errno != EINPROGRESS) {
        error = errno;
      } else {
        if (absl::Status s = WaitFor(fd.get(), POLLOUT, deadline); !s.ok()) {
          if (absl::IsDeadlineExceeded(s)) {
            return PeerTimedOut(kConnecting, peer, timeout, absl::StrCat("connecting to ", published));
          }
          return s;
        }
        socklen_t error_len = sizeof(error);
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &error_len);
      }
    }
    if (error == 0) return fd;
    if (error != ECONNREFUSED || absl::Now() >= deadline) {
      errno = error;
      return Errno(absl::StrCat("connecting to rank ", peer, " at ", published));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

// Moves `bytes` bytes through a non-blocking socket before `deadline`: send (`out`) or
// receive.
absl::Status Transfer(int fd, void* data, size_t bytes, bool out, absl::Time deadline) {
  char* p = static_cast<char*>(data);
  for (size_t done = 0; done < bytes;) {
    ssize_t k = out ? ::send(fd, p + done, bytes - done, MSG_NOSIGNAL)
                    : ::recv(fd, p + done, bytes - done, 0);
    if (k > 0) {
      done += static_cast<size_t>(k);
    } else if (k == 0) {
      return absl::UnavailableError("connection closed");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (absl::Status s = WaitFor(fd, out ? POLLOUT : POLLIN, deadline); !s.ok()) return s;
    } else if (errno != EINTR) {
      return Errno(out ? "send" : "recv");
    }
  }
  return absl::OkStatus();
}

// Accepts rank `peer`'s connection on `listener` before `deadline`; it introduces itself
// by its rank (4 bytes). Connections from anyone else are dropped.
absl::StatusOr<Fd> AcceptFrom(int listener, int peer, absl::Time deadline,
                              absl::Duration timeout) {
  for (;;) {
    if (absl::Status s = WaitFor(listener, POLLIN, deadline); !s.ok()) {
      if (absl::IsDeadlineExceeded(s)) {
        return PeerTimedOut(kConnecting, peer, timeout, "waiting for its connection");
      }
      return s;
    }
    Fd fd(::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      return Errno("accept");
    }
    int32_t who = -1;
    if (Transfer(fd.get(), &who, sizeof(who), /*out=*/false, deadline).ok() && who == peer) {
      return fd;
    }
  }
}

// How long an operation that is waiting spins before it sleeps in poll(2).
constexpr absl::Duration kSpinBeforeSleep = absl::Microseconds(50);

// The reduce-scatter receive ring: small enough to stay in cache.
constexpr size_t kScratchBytes = 256 << 10;

size_t ChunkBegin(size_t count, int size, int chunk) {
  return count * static_cast<size_t>(chunk) / static_cast<size_t>(size);
}

}  // namespace

TcpRing::TcpRing(const GlooOptions& options, int next_fd, int prev_fd)
    : options_(options),
      next_fd_(next_fd),
      prev_fd_(prev_fd),
      scratch_(kScratchBytes / sizeof(float)) {}

TcpRing::~TcpRing() {
  ::close(next_fd_);
  ::close(prev_fd_);
}

void TcpRing::Abort() {
  ::shutdown(next_fd_, SHUT_RDWR);
  ::shutdown(prev_fd_, SHUT_RDWR);
}

absl::Status TcpRing::AllReduce(float* data, size_t count) {
  const int n = options_.size, r = options_.rank;
  if (count == 0 || n == 1) return absl::OkStatus();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  auto mod = [n](int i) { return ((i % n) + n) % n; };
  // The stream each direction carries: 2(n-1) segments, one chunk each. Reduce-scatter
  // (segments k < n-1): send chunk r-k, receive chunk r-k-1 and add it in. All-gather:
  // send chunk r+1-s, receive chunk r-s in place (s = k-(n-1)). Outgoing segment k is
  // the chunk incoming segment k-1 brought, so it may send what has been processed of it.
  const int segments = 2 * (n - 1);
  auto out_chunk = [&](int k) { return k < n - 1 ? mod(r - k) : mod(r + 1 - (k - (n - 1))); };
  auto in_chunk = [&](int k) { return k < n - 1 ? mod(r - k - 1) : mod(r - (k - (n - 1))); };
  auto begin = [&](int chunk) { return ChunkBegin(count, n, chunk); };
  auto bytes = [&](int chunk) { return (begin(chunk + 1) - begin(chunk)) * sizeof(float); };

  int out_k = 0, in_k = 0;
  size_t out_done = 0, in_done = 0;  // bytes of the current segments
  size_t processed = 0;              // bytes of the incoming segment summed or placed
  absl::Time last_progress = absl::Now();
  while (out_k < segments || in_k < segments) {
    bool progressed = false;
    // Send what may be sent.
    size_t sendable = 0;
    while (out_k < segments) {
      int chunk = out_chunk(out_k);
      size_t total = bytes(chunk);
      sendable = out_k == 0 || in_k > out_k - 1 ? total : in_k == out_k - 1 ? processed : 0;
      if (out_done < sendable) {
        ssize_t k = ::send(next_fd_, reinterpret_cast<char*>(data + begin(chunk)) + out_done,
                           sendable - out_done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          if (errno == EINTR) continue;
          if (errno == EPIPE || errno == ECONNRESET) {
            return PeerLost(kOp, next, absl::StrCat("tcp ring: send: ", std::strerror(errno)));
          }
          return Errno("send");
        }
        out_done += static_cast<size_t>(k);
        progressed = true;
      }
      if (out_done < total) break;
      ++out_k;
      out_done = 0;
    }
    // Receive what has arrived, summing reduce-scatter bytes in as whole floats arrive.
    while (in_k < segments) {
      int chunk = in_chunk(in_k);
      size_t total = bytes(chunk);
      bool reducing = in_k < n - 1;
      if (in_done < total) {
        // Reduce-scatter bytes land in the scratch ring, up to its end at most, and are
        // summed in right away: the ring stays in cache, whatever the buffer's size.
        size_t at = in_done % kScratchBytes;
        char* to = reducing ? reinterpret_cast<char*>(scratch_.data()) + at
                            : reinterpret_cast<char*>(data + begin(chunk)) + in_done;
        size_t want = reducing ? std::min(total - in_done, kScratchBytes - at) : total - in_done;
        ssize_t k = ::recv(prev_fd_, to, want, MSG_DONTWAIT);
        if (k == 0) return PeerLost(kOp, prev, "tcp ring: connection closed");
        if (k < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          if (errno == EINTR) continue;
          if (errno == ECONNRESET) {
            return PeerLost(kOp, prev, absl::StrCat("tcp ring: recv: ", std::strerror(errno)));
          }
          return Errno("recv");
        }
        in_done += static_cast<size_t>(k);
        progressed = true;
        if (reducing) {
          // The floats completed since the last call: contiguous in the ring, as a call
          // never reads past its end (a multiple of a float's size).
          size_t whole = in_done / sizeof(float) * sizeof(float);
          AddInto(data + begin(chunk) + processed / sizeof(float),
                  scratch_.data() + processed % kScratchBytes / sizeof(float),
                  (whole - processed) / sizeof(float));
          processed = whole;
        } else {
          processed = in_done;
        }
      }
      if (in_done < total) break;
      ++in_k;
      in_done = 0;
      processed = 0;
    }
    if (progressed) {
      last_progress = absl::Now();
      continue;
    }
    if (out_k == segments && in_k == segments) break;
    // Nothing moved: wait for the sockets, or spin.
    absl::Duration left = last_progress + options_.timeout - absl::Now();
    int waiting_for = in_k < segments ? prev : next;
    if (left <= absl::ZeroDuration()) {
      return PeerTimedOut(kOp, waiting_for, options_.timeout, "tcp ring: no data moved");
    }
    // A peer's answer often comes within microseconds: spin a little before sleeping,
    // as a wake-up from poll(2) costs tens of them.
    if (options_.busy_poll || absl::Now() - last_progress < kSpinBeforeSleep) continue;
    pollfd fds[2];
    nfds_t nfds = 0;
    if (out_k < segments && out_done < sendable) fds[nfds++] = {next_fd_, POLLOUT, 0};
    if (in_k < segments) fds[nfds++] = {prev_fd_, POLLIN, 0};
    int ms = static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))));
    if (::poll(fds, nfds, ms) < 0 && errno != EINTR) return Errno("poll");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TcpRing>> ConnectTcpRing(const GlooOptions& options,
                                                         Store& store) {
  if (options.size < 2) return nullptr;
  const absl::Time deadline = absl::Now() + options.timeout;
  const int next = (options.rank + 1) % options.size;
  const int prev = (options.rank + options.size - 1) % options.size;

  absl::StatusOr<ListenAddress> addr = ResolveListenAddress(options);
  if (!addr.ok()) return addr.status();
  Fd listener(::socket(addr->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (listener.get() < 0) return Errno("socket");
  int on = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr->addr), addr->len) != 0) {
    return Errno("bind");
  }
  if (::listen(listener.get(), 4) != 0) return Errno("listen");
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0 ||
      ::getnameinfo(reinterpret_cast<sockaddr*>(&bound), bound_len, host, sizeof(host), port,
                    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return Errno("getsockname");
  }
  if (absl::Status s = store.Set(absl::StrCat("ring/addr/", options.rank),
                                 absl::StrCat(host, " ", port));
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<std::string>> published =
      store.Get({absl::StrCat("ring/addr/", next)}, options.timeout);
  if (!published.ok()) {
    if (absl::IsDeadlineExceeded(published.status())) {
      return PeerTimedOut(kConnecting, next, options.timeout, published.status().message());
    }
    return published.status();
  }

  // Connect first: the peer's kernel completes it before the peer accepts, so no rank
  // waits for another to get past its own connect.
  absl::StatusOr<Fd> next_fd = ConnectTo(published->front(), next, deadline, options.timeout);
  if (!next_fd.ok()) return next_fd.status();
  int32_t me = options.rank;
  if (absl::Status s = Transfer(next_fd->get(), &me, sizeof(me), /*out=*/true, deadline); !s.ok()) {
    return PeerLost(kConnecting, next, s.message());
  }
  absl::StatusOr<Fd> prev_fd = AcceptFrom(listener.get(), prev, deadline, options.timeout);
  if (!prev_fd.ok()) return prev_fd.status();
  for (int fd : {next_fd->get(), prev_fd->get()}) {
    if (absl::Status s = SetNoDelayNonBlocking(fd); !s.ok()) return s;
  }
  return std::unique_ptr<TcpRing>(new TcpRing(options, next_fd->release(), prev_fd->release()));
}

}  // namespace cohort::trainer::collective
