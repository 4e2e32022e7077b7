// cohort_collective_bench: the Gloo backend's all-reduce between N forked ranks, 4 KiB to
// 64 MiB: through shared memory, as ranks of one machine run it, or with --tcp over
// loopback TCP (the TCP ring, tcp_ring.h), as ranks of several machines would. Prints,
// per size, the transport, the mean and median latency and the bandwidths:
// algbw = bytes / mean time and busbw = algbw * 2(n-1)/n (what each link carries, as
// nccl-tests report it). First it measures the reference at each size from 1 MiB: loopback
// TCP with both directions busy at once, which a 2-rank all-reduce of as many bytes cannot
// beat (a 2-rank all-reduce's busbw is the bytes each rank sends per second). --json
// prints the same as one JSON object per line (bench/run reads them).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"

#include "worker/trainer/collective/file_store.h"
#include "worker/trainer/collective/gloo_collective.h"

namespace cohort::trainer::collective {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Sends `out` and receives as many bytes into `in` at once: a thread sends while this
// one receives, both blocking, so neither direction waits for the other.
bool Exchange(int fd, const std::vector<char>& out, std::vector<char>& in) {
  bool sent_all = true;
  std::thread sender([&] {
    for (size_t sent = 0; sent < out.size();) {
      ssize_t k = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (k <= 0 && errno != EINTR) {
        sent_all = false;
        return;
      }
      if (k > 0) sent += static_cast<size_t>(k);
    }
  });
  bool received_all = true;
  for (size_t received = 0; received < in.size();) {
    ssize_t k = ::recv(fd, in.data() + received, in.size() - received, 0);
    if (k == 0 || (k < 0 && errno != EINTR)) {
      received_all = false;
      break;
    }
    if (k > 0) received += static_cast<size_t>(k);
  }
  if (!received_all) ::shutdown(fd, SHUT_RDWR);  // unblocks the sender
  sender.join();
  return sent_all && received_all;
}

// Both ends send and receive `bytes` at once over one loopback connection, `rounds`
// times, with send buffers as large as gloo asks for; returns the best round's
// per-direction bandwidth in GB/s, or a negative number on failure.
double LoopbackTcp(size_t bytes, int rounds) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return -1;
  }
  auto exchange = [bytes, rounds](int fd, double* best) {
    int sndbuf = 32 << 20;  // what gloo requests; the kernel caps it at 2x wmem_max
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    std::vector<char> out(bytes, 1), in(bytes, 0);
    bool ok = true;
    for (int round = 0; round < rounds && ok; ++round) {
      Clock::time_point start = Clock::now();
      ok = Exchange(fd, out, in);
      *best = std::max(*best, static_cast<double>(bytes) / Seconds(start) / 1e9);
    }
    return ok;
  };
  pid_t child = ::fork();
  if (child == 0) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    double ignored = 0;
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
              exchange(fd, &ignored);
    _exit(ok ? 0 : 1);
  }
  int fd = ::accept(listener, nullptr, nullptr);
  double best = 0;
  bool ok = fd >= 0 && exchange(fd, &best);
  ::close(fd);
  ::close(listener);
  int status = 0;
  ::waitpid(child, &status, 0);
  return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? best : -1;
}

int RunRank(const GlooOptions& options, const std::string& dir, size_t min_bytes,
            size_t max_bytes, bool json) {
  absl::StatusOr<std::unique_ptr<FileStore>> store = FileStore::Open(dir);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Collective>> collective =
      CreateGlooCollective(options, store->get());
  if (!collective.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", options.rank, collective.status().ToString().c_str());
    return 1;
  }
  Collective& c = **collective;
  double bus_factor = 2.0 * (c.size() - 1) / c.size();
  if (c.rank() == 0 && !json) {
    std::printf("%10s  %-16s  %10s  %10s  %10s  %10s\n", "bytes", "algorithm", "latency_us",
                "median_us", "algbw_GB/s", "busbw_GB/s");
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    std::vector<float> buffer(bytes / sizeof(float), 1.0f);
    // The same count on every rank: about 1 GiB moved per size, 5 to 1000 iterations.
    int iterations = static_cast<int>(std::clamp<size_t>((1u << 30) / bytes, 5, 1000));
    absl::Status s = c.AllReduce(buffer.data(), buffer.size());  // warm-up
    if (s.ok()) s = c.Barrier();
    std::vector<double> times;
    Clock::time_point start = Clock::now();
    for (int i = 0; i < iterations && s.ok(); ++i) {
      Clock::time_point one = Clock::now();
      s = c.AllReduce(buffer.data(), buffer.size());
      times.push_back(Seconds(one));
    }
    double seconds = Seconds(start) / iterations;
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    double median = times[times.size() / 2];
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", c.rank(), s.ToString().c_str());
      return 1;
    }
    if (c.rank() == 0) {
      double algbw = static_cast<double>(bytes) / seconds / 1e9;
      std::string name(c.transport() == "tcp" ? "tcp ring" : c.transport());
      std::printf(json ? "{\"what\": \"all_reduce\", \"bytes\": %zu, \"algorithm\": \"%s\", "
                         "\"mean_us\": %.1f, \"median_us\": %.1f, \"algbw_gbps\": %.4f, "
                         "\"busbw_gbps\": %.4f, \"iterations\": %d}\n"
                       : "%10zu  %-16s  %10.1f  %10.1f  %10.3f  %10.3f\n",
                  bytes, name.c_str(), seconds * 1e6, median * 1e6, algbw, algbw * bus_factor,
                  iterations);
    }
  }
  return 0;
}

}  // namespace
}  // namespace cohort::trainer::collective

int main(int argc, char** argv) {
  using namespace cohort::trainer::collective;
  CLI::App app("Gloo all-reduce on loopback: latency and bus bandwidth per message size");
  GlooOptions options;
  options.size = 2;
  size_t min_bytes = 4 << 10;
  size_t max_bytes = 64 << 20;
  app.add_option("--ranks", options.size, "ranks to fork")->check(CLI::Range(1, 64));
  app.add_flag("--busy-poll", options.busy_poll, "spin on receive");
  bool tcp_only = false;
  app.add_flag("--tcp", tcp_only,
               "all-reduce over loopback TCP, not through shared memory as ranks of one machine do");
  app.add_option("--min-bytes", min_bytes, "smallest message");
  app.add_option("--max-bytes", max_bytes, "largest message");
  bool json = false;
  app.add_flag("--json", json, "one JSON object per line");
  CLI11_PARSE(app, argc, argv);
  options.shared_memory = !tcp_only;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  // The reference at every size from 1 MiB up that the all-reduce runs: the most loopback
  // TCP carries for that many bytes (the best of 8 rounds). It falls with the size, as
  // larger buffers leave the caches.
  if (!json) std::printf("loopback TCP, both directions at once, best of 8 rounds, per direction:\n");
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    if (bytes < (size_t{1} << 20)) continue;
    double gbps = LoopbackTcp(bytes, 8);
    std::printf(json ? "{\"what\": \"loopback_tcp\", \"bytes\": %zu, \"gbps\": %.4f}\n"
                     : "%10zu  %.3f GB/s\n",
                bytes, gbps);
  }
  if (!json) {
    std::printf("gloo all-reduce, %d ranks on this machine, %s\n", options.size,
                tcp_only ? absl::StrCat("over loopback TCP (the TCP ring)",
                                        options.busy_poll ? ", busy polling" : "").c_str()
                         : "through shared memory");
  }

  char dir[] = "/tmp/cohort-collective-bench-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 1;
  std::vector<pid_t> ranks;
  for (int rank = 0; rank < options.size; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) {
      GlooOptions mine = options;
      mine.rank = rank;
      int code = RunRank(mine, dir, min_bytes, max_bytes, json);
      std::fflush(stdout);
      _exit(code);
    }
    ranks.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : ranks) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return failed == 0 ? 0 : 1;
}
