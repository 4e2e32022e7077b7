#pragma once

// glibc malloc serves blocks above its mmap threshold (128 KiB at first) with mmap and
// gives them back to the kernel on free; a training step allocates and frees the same
// large activations every step, so the process spends as much time in page faults as
// in arithmetic (system time ~ user time). TuneAllocator raises the mmap and trim
// thresholds so those blocks stay in the heap and are reused. Safe to call more than
// once; a no-op when another allocator (jemalloc via LD_PRELOAD) is in use.
//
// glibc caps the mmap threshold at 32 MiB, and larger blocks still go back to the
// kernel on every free: the cnn at batch 1024 allocates several activations of 44-88 MB
// per step, and spent 0.17 s in the kernel per second of arithmetic. So
// CacheLargeCpuBlocks installs LibTorch's CPU allocator for the process: blocks of 32 MiB
// and more (rounded up to 2 MiB) are kept when freed, up to kLargeBlockCacheBytes in
// all, and handed to the next allocation they fit (the smallest, if at most twice its
// size); an allocation that none fits frees them all first, so the peak stays what it
// was. Smaller blocks go to LibTorch's default allocator as before. Call once, before training allocates.

#include <cstddef>

namespace cohort::trainer {

inline constexpr size_t kLargeBlockCacheBytes = size_t{2} << 30;

void TuneAllocator();
void CacheLargeCpuBlocks();

}  // namespace cohort::trainer
