#pragma once

// Ctrl-C for the commands that watch a job: SIGINT (and SIGTERM) must detach from the
// job, not kill it, and say how to reattach. The signals are taken on a thread of
// their own (sigtimedwait), so what they do may take locks and call gRPC.
//
// Construct an InterruptWatcher first thing, before any other thread exists: it blocks
// the signals in the calling thread, and threads started later (gRPC's) inherit that.
// Before StartWatching() (the command is still uploading or submitting) a signal ends
// the process at once with exit code 130, as an unhandled SIGINT would. From then on a
// signal sets interrupted() and cancels the call registered with SetCall, if any
// (TryCancel, safe from any thread); the watcher sees the cancelled stream, checks
// interrupted() and detaches.

#include <atomic>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace grpc {
class ClientContext;
}

namespace cohort::client {

// What a process interrupted by Ctrl-C exits with (128 + SIGINT), as shells expect.
inline constexpr int kExitInterrupted = 130;

class InterruptWatcher {
 public:
  InterruptWatcher();
  ~InterruptWatcher();  // stops the thread and unblocks the signals
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  // From now on a signal detaches instead of ending the process.
  void StartWatching();
  // Registers the call a signal cancels (not owned; nullptr: none). A signal that came
  // before a call is registered cancels the call at once.
  void SetCall(grpc::ClientContext* context);
  bool interrupted() const { return interrupted_.load(); }

 private:
  void Run();

  std::atomic<bool> stop_{false};
  std::atomic<bool> interrupted_{false};
  absl::Mutex mu_;
  grpc::ClientContext* call_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool watching_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace cohort::client
