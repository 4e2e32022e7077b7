#include "common/metrics/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "tests/support/http_get.h"

namespace cohort::metrics {
namespace {

using cohort::testing::HttpBody;
using cohort::testing::HttpExchange;
using cohort::testing::HttpGet;

std::unique_ptr<MetricsHttpServer> StartServer(std::function<std::string()> render,
                                               HttpServerOptions options = {}) {
  options.listen = {"127.0.0.1", 0};
  auto server = MetricsHttpServer::Start(options, std::move(render));
  REQUIRE(server.ok());
  REQUIRE((*server)->port() != 0);
  return std::move(*server);
}

std::string StatusLine(const std::string& response) { return response.substr(0, response.find("\r\n")); }

TEST_CASE("GET /metrics returns the rendered text in format 0.0.4", "[metrics]") {
  std::atomic<int> calls{0};
  auto server = StartServer([&] { return "m " + std::to_string(++calls) + "\n"; });
  std::string r = HttpGet(server->port(), "/metrics");
  CHECK(StatusLine(r) == "HTTP/1.1 200 OK");
  CHECK(absl::StrContains(r, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  CHECK(absl::StrContains(r, "\r\nContent-Length: 4\r\n"));
  CHECK(absl::StrContains(r, "\r\nConnection: close\r\n"));
  CHECK(HttpBody(r) == "m 1\n");
  CHECK(HttpBody(HttpGet(server->port(), "/metrics?x=1")) == "m 2\n");
  // HEAD: the headers alone.
  std::string head = HttpExchange(server->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  CHECK(StatusLine(head) == "HTTP/1.1 200 OK");
  CHECK(HttpBody(head) == "");
}

TEST_CASE("Other paths, methods and malformed requests are refused", "[metrics]") {
  auto server = StartServer([] { return "m 1\n"; });
  CHECK(StatusLine(HttpGet(server->port(), "/")) == "HTTP/1.1 404 Not Found");
  CHECK(StatusLine(HttpGet(server->port(), "/metricsx")) == "HTTP/1.1 404 Not Found");
  std::string post = HttpExchange(server->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  CHECK(StatusLine(post) == "HTTP/1.1 405 Method Not Allowed");
  CHECK(absl::StrContains(post, "\r\nAllow: GET, HEAD\r\n"));
  CHECK(StatusLine(HttpExchange(server->port(), "hello\r\n\r\n")) == "HTTP/1.1 400 Bad Request");
  CHECK(StatusLine(HttpExchange(server->port(), "GET metrics HTTP/1.1\r\n\r\n")) ==
        "HTTP/1.1 400 Bad Request");
  // Still serving after all that.
  CHECK(HttpBody(HttpGet(server->port(), "/metrics")) == "m 1\n");
}

TEST_CASE("A refused request with a body it never reads still gets its answer", "[metrics]") {
  auto server = StartServer([] { return "m 1\n"; });
  std::string body(200000, 'x');
  std::string post = HttpExchange(server->port(), "POST /metrics HTTP/1.1\r\nContent-Length: " +
                                                      std::to_string(body.size()) + "\r\n\r\n" + body);
  CHECK(StatusLine(post) == "HTTP/1.1 405 Method Not Allowed");
}

TEST_CASE("A request head over the limit gets 431", "[metrics]") {
  HttpServerOptions options;
  options.max_request_bytes = 1024;
  auto server = StartServer([] { return "m 1\n"; }, options);
  std::string big = "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(4000, 'a') + "\r\n\r\n";
  CHECK(StatusLine(HttpExchange(server->port(), big)) == "HTTP/1.1 431 Request Header Fields Too Large");
  CHECK(HttpBody(HttpGet(server->port(), "/metrics")) == "m 1\n");
}

TEST_CASE("A client that stalls is dropped after the read timeout", "[metrics]") {
  HttpServerOptions options;
  options.read_timeout = absl::Milliseconds(300);
  auto server = StartServer([] { return "m 1\n"; }, options);
  absl::Time start = absl::Now();
  // Half a request, never finished: the server closes it without an answer.
  CHECK(HttpExchange(server->port(), "GET /metrics HTTP/1.1\r\n", absl::Seconds(5)) == "");
  CHECK(absl::Now() - start < absl::Seconds(3));
  CHECK(HttpBody(HttpGet(server->port(), "/metrics")) == "m 1\n");
}

TEST_CASE("Stop returns promptly with a client connected, and the port is closed", "[metrics]") {
  auto server = StartServer([] { return "m 1\n"; });
  int port = server->port();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  absl::SleepFor(absl::Milliseconds(100));  // the server is now reading from it
  absl::Time start = absl::Now();
  server->Stop();
  CHECK(absl::Now() - start < absl::Seconds(1));
  server->Stop();  // idempotent
  server.reset();
  close(fd);
  CHECK(HttpGet(port, "/metrics") == "");
}

TEST_CASE("An address in use is an error naming it", "[metrics]") {
  auto first = StartServer([] { return ""; });
  HttpServerOptions options;
  options.listen = {"127.0.0.1", first->port()};
  auto second = MetricsHttpServer::Start(options, [] { return ""; });
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(second.status().message(), "127.0.0.1:" + std::to_string(first->port())));
}

}  // namespace
}  // namespace cohort::metrics
