#include "worker/trainer/batch_prefetch.h"

namespace cohort::trainer {

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

BatchPrefetcher::Batch BatchPrefetcher::Gather(int64_t step, bool threaded) const {
  Batch b;
  BatchPlan::Slice slice = plan_.RankSlice(step);
  if (slice.rows.empty()) return b;
  try {
    b.status = data_.GatherTrain(slice.rows, device_, check_, threaded, &b.x, &b.y);
  } catch (const std::exception& e) {  // LibTorch's, on the gathering thread
    b.status = absl::InternalError(e.what());
  }
  return b;
}

void BatchPrefetcher::GatherLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || asked_ >= 0; });
    if (stop_) return;  // an outstanding step is dropped: nobody will take it
    const int64_t step = asked_;
    asked_ = -1;
    gathering_ = true;
    lock.unlock();
    Batch b = Gather(step, /*threaded=*/false);
    lock.lock();
    gathering_ = false;
    done_ = std::move(b);
    done_step_ = step;
    cv_.notify_all();
  }
}

std::optional<BatchPrefetcher::Batch> BatchPrefetcher::TakeGathered(int64_t step) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return asked_ < 0 && !gathering_; });
  std::optional<Batch> b;
  if (done_ && done_step_ == step) b = std::move(done_);
  done_.reset();
  return b;
}

absl::Status BatchPrefetcher::Take(int64_t step, torch::Tensor* x, torch::Tensor* y) {
  std::optional<Batch> b = TakeGathered(step);
  if (!b) b = Gather(step, /*threaded=*/true);
  if (background_ && step + 1 < plan_.steps()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      asked_ = step + 1;
    }
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { GatherLoop(); });
    } else {
      cv_.notify_all();
    }
  }
  if (!b->status.ok()) return b->status;
  *x = std::move(b->x);
  *y = std::move(b->y);
  return absl::OkStatus();
}

}  // namespace cohort::trainer
