#include "worker/trainer/gradient_reducer.h"

#include <torch/csrc/autograd/function_hook.h>

#include <algorithm>

#include "absl/time/clock.h"

namespace cohort::trainer {
namespace {

class ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  explicit ReadyHook(std::function<void()> ready) : ready_(std::move(ready)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    ready_();
    return outputs;
  }

 private:
  std::function<void()> ready_;
};

}  // namespace

GradientReducer::GradientReducer(FlatParameters* flat, const std::vector<torch::Tensor*>& variables,
                                 collective::Collective* collective, Options options)
    : flat_(flat), collective_(collective) {
  const auto& slots = flat->slots();
  int64_t limit = options.first_bucket_bytes / 4;
  for (size_t v = 0; v < slots.size(); ++v) {
    if (buckets_.empty() || (buckets_.back().numel > 0 && buckets_.back().numel + slots[v].numel > limit)) {
      if (!buckets_.empty()) limit = options.bucket_bytes / 4;
      buckets_.push_back({slots[v].offset, 0, 0, 0});
    }
    buckets_.back().numel = slots[v].offset + slots[v].numel - buckets_.back().offset;
    buckets_.back().variables += 1;
    bucket_of_.push_back(static_cast<int>(buckets_.size()) - 1);
  }
  if (collective_ == nullptr || collective_->size() == 1) return;
  for (size_t v = 0; v < variables.size(); ++v) {
    std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(*variables[v]);
    int index = static_cast<int>(v);
    acc->add_post_hook(std::make_unique<ReadyHook>([this, index] { GradientReady(index); }));
    accumulators_.push_back(std::move(acc));
  }
}

GradientReducer::~GradientReducer() {
  // Outstanding operations use the gradient buffer: let them finish first.
  for (auto& w : works_) w->Wait().IgnoreError();
}

void GradientReducer::BeginStep() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Bucket& b : buckets_) b.ready = 0;
  next_to_start_ = 0;
  works_.clear();
  starts_.clear();
}

void GradientReducer::GradientReady(int variable) {
  if (collective_ == nullptr || collective_->size() == 1) return;
  std::lock_guard<std::mutex> lock(mu_);
  buckets_[bucket_of_[variable]].ready += 1;
  StartReadyBuckets();
}

void GradientReducer::StartReadyBuckets() {
  while (next_to_start_ < static_cast<int>(buckets_.size()) &&
         buckets_[next_to_start_].ready >= buckets_[next_to_start_].variables) {
    absl::Time now = absl::Now();
    if (next_to_start_ == 0) first_start_ = now;
    starts_.push_back(now);
    Bucket& b = buckets_[next_to_start_++];
    float* data = flat_->grad().data_ptr<float>() + b.offset;
    // On CUDA the NCCL collective orders itself after the kernels queued on LibTorch's
    // stream (the legacy default stream), which wrote these gradients.
    works_.push_back(collective_->StartAllReduce(data, static_cast<size_t>(b.numel)));
  }
}

absl::Status GradientReducer::FinishStep() {
  if (collective_ == nullptr || collective_->size() == 1) return absl::OkStatus();
  std::vector<std::unique_ptr<collective::Work>> works;
  std::vector<absl::Time> starts;
  absl::Time wait_start = absl::Now(), first_start;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Bucket& b : buckets_) b.ready = b.variables;
    StartReadyBuckets();
    works.swap(works_);
    starts.swap(starts_);
    first_start = works.empty() ? wait_start : first_start_;
  }
  absl::Status status = absl::OkStatus();
  std::vector<std::pair<absl::Time, absl::Time>> spans;
  absl::Time previous_end = absl::InfinitePast();
  for (size_t i = 0; i < works.size(); ++i) {
    absl::Status s = works[i]->Wait();
    if (status.ok() && !s.ok()) status = s;
    absl::Time done = absl::Now();
    spans.emplace_back(std::max(starts[i], previous_end), done);
    previous_end = done;
  }
  absl::Time end = absl::Now();
  last_step_ = {end - first_start, end - wait_start, flat_->numel() * 4, std::move(spans)};
  return status;
}

}  // namespace cohort::trainer
