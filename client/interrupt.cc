#include "client/interrupt.h"

#include <grpcpp/client_context.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>

namespace cohort::client {
namespace {

sigset_t Signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

InterruptWatcher::InterruptWatcher() {
  sigset_t set = Signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this] { Run(); });
}

InterruptWatcher::~InterruptWatcher() {
  stop_ = true;
  thread_.join();
  sigset_t set = Signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void InterruptWatcher::StartWatching() {
  absl::MutexLock lock(&mu_);
  watching_ = true;
}

void InterruptWatcher::SetCall(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  call_ = context;
  if (context != nullptr && interrupted_) context->TryCancel();
}

void InterruptWatcher::Run() {
  sigset_t set = Signals();
  const timespec tick{0, 100'000'000};
  while (!stop_) {
    const int sig = sigtimedwait(&set, nullptr, &tick);
    if (sig < 0) continue;  // EAGAIN (the tick) or EINTR
    absl::MutexLock lock(&mu_);
    if (!watching_) {
      static const char kMessage[] = "\ncohort: interrupted\n";
      (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
      std::_Exit(kExitInterrupted);
    }
    interrupted_ = true;
    if (call_ != nullptr) call_->TryCancel();
  }
}

}  // namespace cohort::client
