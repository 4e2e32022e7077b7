#include "worker/trainer/collective/gloo_all_reduce.h"

#include <algorithm>

#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>

namespace cohort::trainer::collective {
GlooAllReduce::GlooAllReduce(std::shared_ptr<GlooContext> context, GlooAlgorithm algorithm,
                             size_t max_segment_bytes)
    : context_(std::move(context)),
      algorithm_(algorithm),
      segment_count_(std::max<size_t>(1, max_segment_bytes / sizeof(float))) {}

std::unique_ptr<gloo::Algorithm> GlooAllReduce::Build(float* data, size_t count) const {
  std::vector<float*> ptrs{data};
  int n = static_cast<int>(count);  // segments are far below INT_MAX
  if (algorithm_ == GlooAlgorithm::kRingChunked) {
    return std::make_unique<gloo::AllreduceRingChunked<float>>(context_, ptrs, n);
  }
  return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context_, ptrs, n);
}

void GlooAllReduce::Run(float* data, size_t count) {
  if (count == 0 || context_->size == 1) return;
  if (count * sizeof(float) < kGlooKeptMinBytes) {
    for (size_t offset = 0; offset < count; offset += segment_count_) {
      size_t n = std::min(segment_count_, count - offset);
      context_->BuildEphemeral([&] { return Build(data + offset, n); })->run();
    }
    return;
  }
  auto [it, inserted] = kept_.try_emplace({data, count});
  std::vector<std::unique_ptr<gloo::Algorithm>>& segments = it->second;
  if (inserted) {
    try {
      for (size_t offset = 0; offset < count; offset += segment_count_) {
        segments.push_back(
            Build(data + offset, std::min(segment_count_, count - offset)));
      }
    } catch (...) {
      kept_.erase(it);
      throw;
    }
  }
  for (auto& segment : segments) segment->run();
}

}  // namespace cohort::trainer::collective
