// CatchTerminationSignals: a SIGTERM reaches WaitForTerminationSignal whichever thread
// the kernel delivers it to, including a thread that has it unblocked while the
// waiting thread blocks it (what OpenBLAS's pool, started before main(), looks like).

#include "common/signals.h"

#include <catch2/catch.hpp>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace {

// Runs `body` in a forked child and returns its wait status.
template <typename Body>
int InChild(Body body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("a SIGTERM taken by another thread still reaches the waiter", "[signals]") {
  const int status = InChild([] {
    std::atomic<bool> stop{false};
    // This thread has SIGTERM unblocked; the main thread blocks it below, so the
    // kernel must deliver the signal here.
    std::thread bystander([&] {
      while (!stop) usleep(1000);
    });
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, nullptr);
    cohort::CatchTerminationSignals();
    kill(getpid(), SIGTERM);
    const int sig = cohort::WaitForTerminationSignal();
    stop = true;
    bystander.join();
    return sig == SIGTERM ? 0 : 1;
  });
  REQUIRE(WIFEXITED(status));  // not killed by the signal
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("SIGINT is reported as SIGINT, and signals queue in order", "[signals]") {
  const int status = InChild([] {
    cohort::CatchTerminationSignals();
    kill(getpid(), SIGINT);
    kill(getpid(), SIGTERM);
    const int first = cohort::WaitForTerminationSignal();
    const int second = cohort::WaitForTerminationSignal();
    return first == SIGINT && second == SIGTERM ? 0 : 1;
  });
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
