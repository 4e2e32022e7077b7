#include "worker/trainer/allocator.h"

#include <malloc.h>

#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <c10/core/CPUAllocator.h>

namespace cohort::trainer {
namespace {

constexpr size_t kLargeBlock = size_t{32} << 20;
constexpr size_t kRounding = size_t{2} << 20;

// The context of every DataPtr is its data pointer, as LibTorch's raw_allocate and
// raw_deallocate (which oneDNN's convolutions use) require.
class LargeBlockCache final : public c10::Allocator {
 public:
  explicit LargeBlockCache(c10::Allocator* fallback) : fallback_(fallback) {}

  c10::DataPtr allocate(size_t n) const override {
    if (n < kLargeBlock) return fallback_->allocate(n);
    size_t size = (n + kRounding - 1) / kRounding * kRounding;
    c10::DataPtr memory;
    std::map<size_t, std::vector<c10::DataPtr>> unfit;
    {
      // The smallest kept block that fits, unless it is twice the size. When none does,
      // every kept block goes back before a fresh one is mapped: a kept block that sits
      // idle meanwhile would add to the peak.
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first <= 2 * size) {
        size = it->first;
        memory = std::move(it->second.back());
        it->second.pop_back();
        if (it->second.empty()) free_.erase(it);
        cached_ -= size;
      } else {
        unfit.swap(free_);
        cached_ = 0;
      }
    }
    unfit.clear();  // outside the lock
    if (!memory) memory = fallback_->allocate(size);
    void* data = memory.get();
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_use_.emplace(data, Block{size, std::move(memory)});
    }
    return {data, data, &Release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Release; }

 private:
  struct Block {
    size_t size;
    c10::DataPtr memory;  // the fallback's allocation
  };

  static void Release(void* data);

  c10::Allocator* const fallback_;
  mutable std::mutex mu_;
  mutable std::unordered_map<void*, Block> in_use_;            // guarded by mu_
  mutable std::map<size_t, std::vector<c10::DataPtr>> free_;  // by size, guarded by mu_
  mutable size_t cached_ = 0;                                  // bytes in free_
};

// Never destroyed: tensors may be freed until the process exits.
LargeBlockCache* const g_cache = new LargeBlockCache(c10::GetDefaultCPUAllocator());

void LargeBlockCache::Release(void* data) {
  LargeBlockCache& cache = *g_cache;
  std::optional<Block> block;
  {
    std::lock_guard<std::mutex> lock(cache.mu_);
    auto it = cache.in_use_.find(data);
    if (it != cache.in_use_.end()) {
      block = std::move(it->second);
      cache.in_use_.erase(it);
      if (cache.cached_ + block->size <= kLargeBlockCacheBytes) {
        cache.cached_ += block->size;
        cache.free_[block->size].push_back(std::move(block->memory));
      }
    }
  }
  // Outside the lock: a small block is the fallback's own (its raw deleter frees it); a
  // large one not kept goes back to the fallback as `block` is destroyed.
  if (!block) cache.fallback_->raw_deleter()(data);
}

}  // namespace

void TuneAllocator() {
  // glibc's ceiling for the mmap threshold on 64-bit systems is 32 MiB: blocks up to
  // that come from the heap; up to 2 GiB of free heap stay mapped.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 0x7fffffff);
  mallopt(M_TOP_PAD, 64 << 20);
}

void CacheLargeCpuBlocks() { c10::SetCPUAllocator(g_cache, /*priority=*/1); }

}  // namespace cohort::trainer
