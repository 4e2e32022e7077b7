#include "worker/trainer/collective/rendezvous.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace cohort::trainer::collective {
namespace {

std::string JoinKey(int rank) { return absl::StrCat("joined/", rank); }

}  // namespace

absl::Status ValidateRankAndSize(absl::string_view what, int rank, int size) {
  if (size < 1) return absl::InvalidArgumentError(absl::StrCat(what, ": size ", size, " < 1"));
  if (rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": rank ", rank, " is outside [0, ", size, ")"));
  }
  return absl::OkStatus();
}

absl::Status JoinRendezvous(Store& store, int rank, int size, absl::Duration timeout) {
  if (absl::Status s = store.Set(JoinKey(rank), ""); !s.ok()) return s;
  absl::Time deadline = absl::Now() + timeout;
  std::vector<int> missing;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    // After the first missing rank, only check (no more waiting) to list the others.
    absl::Duration wait = missing.empty() ? std::max(deadline - absl::Now(), absl::ZeroDuration())
                                          : absl::ZeroDuration();
    absl::StatusOr<std::vector<std::string>> got = store.Get({JoinKey(peer)}, wait);
    if (absl::IsDeadlineExceeded(got.status())) {
      missing.push_back(peer);
    } else if (!got.ok()) {
      return got.status();
    }
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(
      "rendezvous timed out after ", absl::FormatDuration(timeout), " waiting for rank",
      missing.size() == 1 ? " " : "s ", absl::StrJoin(missing, ", "), " to join (this is rank ",
      rank, " of ", size, ")"));
}

}  // namespace cohort::trainer::collective
