#pragma once

// MetricsHttpServer: the smallest HTTP/1.1 server that Prometheus can scrape. It serves
// GET (and HEAD) /metrics with the body `render` makes, as
// "text/plain; version=0.0.4; charset=utf-8", and nothing else:
//
//   /metrics with another method   405, "Allow: GET, HEAD"
//   any other path                 404
//   a request head over max_request_bytes, or not complete within read_timeout
//                                  431, or the connection is closed
//   a request line that is not HTTP 400
//
// One thread accepts and serves connections one at a time; every response closes its
// connection ("Connection: close"), and a request body is never read (what the client
// sends after the head is drained and dropped for at most 200 ms before closing). A client that
// stalls holds the thread for at most read_timeout (scrapes are rare and small).
// Stop() (and the destructor) wakes the thread, closes the listening socket and joins
// it: it returns promptly even while a client is connected.
//
// `render` runs on the server's thread, one call at a time.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/address.h"

namespace cohort::metrics {

struct HttpServerOptions {
  HostPort listen;  // port 0: a free port, see port()
  size_t max_request_bytes = 8192;
  absl::Duration read_timeout = absl::Seconds(5);
};

class MetricsHttpServer {
 public:
  // Binds and listens, then starts the thread. Errors: UNAVAILABLE naming the address
  // when it cannot be resolved, bound (in use) or listened on.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const HttpServerOptions& options, std::function<std::string()> render);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The port listened on (the one picked when options.listen.port was 0).
  uint16_t port() const { return port_; }
  // Idempotent.
  void Stop();

 private:
  MetricsHttpServer(const HttpServerOptions& options, std::function<std::string()> render,
                    int listen_fd, int wake_read, int wake_write, uint16_t port);
  void Serve();
  void HandleConnection(int fd);
  // Reads the request head into `head`; false when the client closed, stalled or Stop
  // was called. Sets `too_large` when the head passed the limit.
  bool ReadHead(int fd, std::string* head, bool* too_large);
  void WriteAll(int fd, const std::string& data);
  void CloseGracefully(int fd);

  const HttpServerOptions options_;
  const std::function<std::string()> render_;
  const int listen_fd_;
  const int wake_read_;   // a pipe: Stop writes a byte to end the thread's polls
  const int wake_write_;
  const uint16_t port_;
  std::thread thread_;
  bool stopped_ = false;  // Stop's; callers do not race on it
};

}  // namespace cohort::metrics
