#pragma once

// glibc malloc serves blocks above its mmap threshold (128 KiB at first) with mmap and
// gives them back to the kernel on free; a training step allocates and frees the same
// large activations every step, so the process spends as much time in page faults as
// in arithmetic (system time ~ user time). TuneAllocator raises the mmap and trim
// thresholds so those blocks stay in the heap and are reused. Safe to call more than
// once; a no-op when another allocator (jemalloc via LD_PRELOAD) is in use.
//
// The cnn at batch 1024 allocates several activations of 22-88 MB per step. Blocks above
// glibc's mmap threshold (at most 32 MiB) go back to the kernel on every free, and
// those below it come from the heap, where the peak then depends on how the free
// blocks happen to lie: the same job peaked anywhere from 676 to 780 MiB with nothing
// but an unused environment variable added. So CacheLargeCpuBlocks installs LibTorch's
// CPU allocator for the process: blocks of kLargeCpuBlock and more (rounded up to
// 2 MiB) are mapped on their own and kept when freed, up to kLargeBlockCacheBytes in
// all, and handed to the next allocation they fit (the smallest, if at most twice its
// size). Before a fresh block is mapped, the largest kept blocks go back until the kept
// blocks and those in use add up to at most twice the most ever in use; a step that
// repeats the last one's allocations maps nothing. The cnn at 1024 rows now peaks at
// 631-634 MiB in every environment tried, its sys time unchanged. Smaller blocks go to
// LibTorch's default allocator as before. Call once, before training allocates.
//
// Each block starts on a 2 MiB boundary and the whole 2 MiB pages of the request that
// mapped it are marked for transparent huge pages (MADV_HUGEPAGE; this kernel's THP
// mode is "madvise"): a step's activations, gathered batch and flat buffers come to
// tens of MiB, past what the TLB covers in 4 KiB pages (docs/benchmarks.md, "Huge
// pages for the large blocks"). Not the partial page at a block's end: a huge page is
// resident whole, so the peak RSS is what it was.

#include <cstddef>

namespace cohort::trainer {

inline constexpr size_t kLargeCpuBlock = size_t{1} << 20;
inline constexpr size_t kLargeBlockCacheBytes = size_t{2} << 30;

// The large-block cache's bytes (block sizes, rounded): in use, kept, and the most in
// use at once so far.
struct LargeBlockStats {
  size_t in_use = 0;
  size_t cached = 0;
  size_t high_water = 0;
};

void TuneAllocator();
void CacheLargeCpuBlocks();
LargeBlockStats LargeCpuBlockStats();

}  // namespace cohort::trainer
