#include "common/signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace cohort {
namespace {

int g_pipe[2] = {-1, -1};

extern "C" void OnTerminationSignal(int sig) {
  const int saved = errno;
  const unsigned char number = static_cast<unsigned char>(sig);
  (void)!write(g_pipe[1], &number, 1);
  errno = saved;
}

}  // namespace

void CatchTerminationSignals() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe2(g_pipe, O_CLOEXEC) != 0) {
      std::perror("cohort: pipe for termination signals");
      std::abort();
    }
    struct sigaction action {};
    action.sa_handler = OnTerminationSignal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
  });
}

int WaitForTerminationSignal() {
  unsigned char number = 0;
  for (;;) {
    const ssize_t n = read(g_pipe[0], &number, 1);
    if (n == 1) return number;
    if (n < 0 && errno == EINTR) continue;
    std::perror("cohort: reading termination signals");
    std::abort();
  }
}

}  // namespace cohort
