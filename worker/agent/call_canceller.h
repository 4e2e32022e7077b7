#pragma once

// CallCanceller: lets one thread cancel the gRPC call another thread is blocked in (a
// rank's data fetch when its attempt is stopped). Cancel() is sticky: calls attached
// after it are cancelled at once. Thread-safe.

#include <grpcpp/client_context.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cohort::agent {

class CallCanceller {
 public:
  void Cancel() {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (current_ != nullptr) current_->TryCancel();
  }
  bool cancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }

  // While alive, `context`'s call is cancelled by Cancel().
  class Scope {
   public:
    Scope(CallCanceller* canceller, grpc::ClientContext* context) : canceller_(canceller) {
      if (canceller_ == nullptr) return;
      absl::MutexLock lock(&canceller_->mu_);
      canceller_->current_ = context;
      if (canceller_->cancelled_) context->TryCancel();
    }
    ~Scope() {
      if (canceller_ == nullptr) return;
      absl::MutexLock lock(&canceller_->mu_);
      canceller_->current_ = nullptr;
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallCanceller* canceller_;
  };

 private:
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* current_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace cohort::agent
