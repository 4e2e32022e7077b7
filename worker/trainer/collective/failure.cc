#include "worker/trainer/collective/failure.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace cohort::trainer::collective {
namespace {

std::string Bracketed(absl::string_view detail) {
  return detail.empty() ? std::string() : absl::StrCat(" [", detail, "]");
}

class DoneWork final : public Work {
 public:
  explicit DoneWork(absl::Status status) : status_(std::move(status)) {}
  absl::Status Wait() override { return status_; }

 private:
  const absl::Status status_;
};

}  // namespace

absl::Status PeerTimedOut(absl::string_view op, std::optional<int> peer, absl::Duration timeout,
                          absl::string_view detail) {
  return absl::DeadlineExceededError(
      absl::StrCat(op, " timed out after ", absl::FormatDuration(timeout), " waiting for ",
                   peer ? absl::StrCat("rank ", *peer) : std::string("a peer"), Bracketed(detail)));
}

absl::Status PeerLost(absl::string_view op, std::optional<int> peer, absl::string_view detail) {
  return absl::UnavailableError(
      absl::StrCat(op, " with ", peer ? absl::StrCat("rank ", *peer) : std::string("a peer"),
                   " failed: connection closed (peer died?)", Bracketed(detail)));
}

absl::Status FailureLatch::Check() const {
  absl::MutexLock lock(&mu_);
  if (first_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("collective is unusable after an earlier error: ", first_.ToString()));
}

absl::Status FailureLatch::Record(absl::Status status) {
  if (!status.ok()) {
    absl::MutexLock lock(&mu_);
    if (first_.ok()) first_ = status;
  }
  return status;
}

std::unique_ptr<Work> CompletedWork(absl::Status status) {
  return std::make_unique<DoneWork>(std::move(status));
}

}  // namespace cohort::trainer::collective
