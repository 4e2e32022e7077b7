#include "worker/trainer/collective/gloo_all_reduce.h"

#include <algorithm>

#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>

namespace cohort::trainer::collective {
namespace {

// Below this, latency rules: halving-doubling's log2(n) rounds beat the ring's 2n.
constexpr size_t kRingMinBytes = 1 << 20;

bool IsPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

GlooAlgorithm ResolveGlooAlgorithm(GlooAlgorithm requested, size_t bytes, int size) {
  if (requested != GlooAlgorithm::kAuto) return requested;
  if (bytes < kRingMinBytes || IsPowerOfTwo(size)) return GlooAlgorithm::kHalvingDoubling;
  return GlooAlgorithm::kRingChunked;
}

GlooAllReduce::GlooAllReduce(std::shared_ptr<GlooContext> context, GlooAlgorithm algorithm,
                             size_t max_segment_bytes)
    : context_(std::move(context)),
      algorithm_(algorithm),
      segment_count_(std::max<size_t>(1, max_segment_bytes / sizeof(float))) {}

std::unique_ptr<gloo::Algorithm> GlooAllReduce::Build(float* data, size_t count,
                                                      size_t total) const {
  std::vector<float*> ptrs{data};
  int n = static_cast<int>(count);  // segments are far below INT_MAX
  switch (ResolveGlooAlgorithm(algorithm_, total * sizeof(float), context_->size)) {
    case GlooAlgorithm::kRingChunked:
      return std::make_unique<gloo::AllreduceRingChunked<float>>(context_, ptrs, n);
    case GlooAlgorithm::kHalvingDoubling:
    case GlooAlgorithm::kAuto:
      break;
  }
  return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context_, ptrs, n);
}

void GlooAllReduce::Run(float* data, size_t count) {
  if (count == 0 || context_->size == 1) return;
  if (count * sizeof(float) < kGlooKeptMinBytes) {
    for (size_t offset = 0; offset < count; offset += segment_count_) {
      size_t n = std::min(segment_count_, count - offset);
      context_->BuildEphemeral([&] { return Build(data + offset, n, count); })->run();
    }
    return;
  }
  auto [it, inserted] = kept_.try_emplace({data, count});
  std::vector<std::unique_ptr<gloo::Algorithm>>& segments = it->second;
  if (inserted) {
    try {
      for (size_t offset = 0; offset < count; offset += segment_count_) {
        segments.push_back(
            Build(data + offset, std::min(segment_count_, count - offset), count));
      }
    } catch (...) {
      kept_.erase(it);
      throw;
    }
  }
  for (auto& segment : segments) segment->run();
}

}  // namespace cohort::trainer::collective
