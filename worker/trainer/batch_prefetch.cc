#include "worker/trainer/batch_prefetch.h"

namespace cohort::trainer {

BatchPrefetcher::~BatchPrefetcher() {
  if (next_.valid()) next_.wait();
}

BatchPrefetcher::Batch BatchPrefetcher::Gather(int64_t step) const {
  Batch b;
  BatchPlan::Slice slice = plan_.RankSlice(step);
  if (slice.rows.empty()) return b;
  try {
    b.status = data_.GatherTrain(slice.rows, device_, check_, &b.x, &b.y);
  } catch (const std::exception& e) {  // LibTorch's, on the gathering thread
    b.status = absl::InternalError(e.what());
  }
  return b;
}

absl::Status BatchPrefetcher::Take(int64_t step, torch::Tensor* x, torch::Tensor* y) {
  Batch b;
  if (next_.valid() && next_step_ == step) {
    b = next_.get();
  } else {
    if (next_.valid()) next_.wait();
    b = Gather(step);
  }
  if (step + 1 < plan_.steps()) {
    next_step_ = step + 1;
    next_ = std::async(std::launch::async, [this, next = step + 1] { return Gather(next); });
  }
  if (!b.status.ok()) return b.status;
  *x = std::move(b.x);
  *y = std::move(b.y);
  return absl::OkStatus();
}

}  // namespace cohort::trainer
