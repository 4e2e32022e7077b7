#include "worker/trainer/batch_plan.h"

#include <numeric>

namespace cohort::trainer {
namespace {

// SplitMix64: a fixed, portable generator (std:: distributions differ between
// standard libraries; ranks on different hosts must agree).
uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias (Lemire's method).
uint64_t Below(uint64_t& state, uint64_t bound) {
  while (true) {
    __uint128_t m = static_cast<__uint128_t>(SplitMix(state)) * bound;
    uint64_t low = static_cast<uint64_t>(m);
    if (low >= bound || low >= (-bound) % bound) return static_cast<uint64_t>(m >> 64);
  }
}

}  // namespace

BatchPlan::BatchPlan(int64_t rows, int64_t global_batch, int rank, int world, bool shuffle,
                     uint64_t seed)
    : rows_(rows), global_batch_(global_batch), rank_(rank), world_(world), shuffle_(shuffle),
      seed_(seed), order_(rows) {
  std::iota(order_.begin(), order_.end(), 0);
}

void BatchPlan::StartEpoch(int epoch) {
  std::iota(order_.begin(), order_.end(), 0);
  if (!shuffle_) return;
  uint64_t state = seed_ * 0x100000001b3ULL + static_cast<uint64_t>(epoch) + 1;
  SplitMix(state);
  for (int64_t i = rows_ - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(Below(state, static_cast<uint64_t>(i + 1)));
    std::swap(order_[i], order_[j]);
  }
}

BatchPlan::Slice BatchPlan::RankSlice(int64_t step) const {
  int64_t begin = step * global_batch_;
  int64_t n = std::min(global_batch_, rows_ - begin);
  int64_t lo = n * rank_ / world_, hi = n * (rank_ + 1) / world_;
  return {std::span<const int64_t>(order_.data() + begin + lo, hi - lo), n};
}

std::pair<int64_t, int64_t> RankShare(int64_t rows, int rank, int world) {
  return {rows * rank / world, rows * (rank + 1) / world};
}

}  // namespace cohort::trainer
