#include "worker/trainer/allocator.h"

#include <malloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

namespace cohort::trainer {
namespace {

constexpr size_t kRounding = size_t{2} << 20;

// A fresh block of `size` bytes (a multiple of kRounding) that starts on a 2 MiB
// boundary, with the whole 2 MiB pages of its first `used` bytes marked for transparent
// huge pages; nullptr when the kernel has no memory for it. Only those pages: a huge page
// is resident whole once touched, so marking the rest of a block the request does not
// fill would add to the peak RSS. Where the kernel has no transparent huge pages (or
// they are off) madvise fails and the block keeps its 4 KiB pages.
void* MapBlock(size_t size, size_t used) {
  // Mapped kRounding longer, then trimmed to the boundary inside it.
  void* mapped = mmap(nullptr, size + kRounding, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  char* raw = static_cast<char*>(mapped);
  const uintptr_t address = reinterpret_cast<uintptr_t>(raw);
  char* begin = raw + (kRounding - address % kRounding) % kRounding;
  if (begin > raw) munmap(raw, begin - raw);
  munmap(begin + size, raw + kRounding - begin);  // never empty: begin < raw + kRounding
  if (const size_t whole = used / kRounding * kRounding; whole > 0) {
    madvise(begin, whole, MADV_HUGEPAGE);
  }
  return begin;
}

// The context of every DataPtr is its data pointer, as LibTorch's raw_allocate and
// raw_deallocate (which oneDNN's convolutions use) require.
class LargeBlockCache final : public c10::Allocator {
 public:
  explicit LargeBlockCache(c10::Allocator* fallback) : fallback_(fallback) {}

  c10::DataPtr allocate(size_t n) const override {
    if (n < kLargeCpuBlock) return fallback_->allocate(n);
    size_t size = (n + kRounding - 1) / kRounding * kRounding;
    void* data = nullptr;
    // One lock throughout: the ranks' allocations of this size are a few per step,
    // and the system calls below are what they would cost without the cache.
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest kept block that fits, unless it is twice the size.
    auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first <= 2 * size) {
      size = it->first;
      data = it->second.back();
      it->second.pop_back();
      if (it->second.empty()) free_.erase(it);
      stats_.cached -= size;
    } else {
      // A fresh block: the largest kept ones go back first, until the kept blocks and
      // those in use come to at most twice the most ever in use before it (or to what
      // is in use with it, when that is more). At once the most in use, blocks one
      // step frees and the next wants in other sizes were re-mapped every step (the
      // cnn at 1024 rows: sys time 0.26 -> 3 s); at twice, none.
      const size_t limit = std::max(2 * stats_.high_water, stats_.in_use + size);
      while (!free_.empty() && stats_.in_use + size + stats_.cached > limit) {
        auto largest = std::prev(free_.end());
        munmap(largest->second.back(), largest->first);
        largest->second.pop_back();
        stats_.cached -= largest->first;
        if (largest->second.empty()) free_.erase(largest);
      }
      data = MapBlock(size, n);
      TORCH_CHECK(data != nullptr, "out of memory: mapping ", size, " bytes failed");
    }
    stats_.in_use += size;
    stats_.high_water = std::max(stats_.high_water, stats_.in_use);
    in_use_.emplace(data, size);
    return {data, data, &Release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Release; }

  LargeBlockStats Stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  static void Release(void* data);

  c10::Allocator* const fallback_;
  mutable std::mutex mu_;
  mutable std::unordered_map<void*, size_t> in_use_;      // block -> size, guarded by mu_
  mutable std::map<size_t, std::vector<void*>> free_;     // by size, guarded by mu_
  mutable LargeBlockStats stats_;                         // guarded by mu_
};

// Never destroyed: tensors may be freed until the process exits.
LargeBlockCache* const g_cache = new LargeBlockCache(c10::GetDefaultCPUAllocator());

void LargeBlockCache::Release(void* data) {
  LargeBlockCache& cache = *g_cache;
  size_t size = 0;
  {
    std::lock_guard<std::mutex> lock(cache.mu_);
    auto it = cache.in_use_.find(data);
    if (it == cache.in_use_.end()) {
      // A small block: the fallback's own, here when oneDNN's raw_deallocate frees it
      // through raw_deleter.
      cache.fallback_->raw_deleter()(data);
      return;
    }
    size = it->second;
    cache.in_use_.erase(it);
    cache.stats_.in_use -= size;
    if (cache.stats_.cached + size <= kLargeBlockCacheBytes) {
      cache.stats_.cached += size;
      cache.free_[size].push_back(data);
      return;
    }
  }
  munmap(data, size);  // outside the lock
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

LargeBlockStats LargeCpuBlockStats() { return g_cache->Stats(); }

}  // namespace cohort::trainer
