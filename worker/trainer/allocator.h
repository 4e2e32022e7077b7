#pragma once

// glibc malloc serves blocks above its mmap threshold (128 KiB at first) with mmap and
// gives them back to the kernel on free; a training step allocates and frees the same
// large activations every step, so the process spends as much time in page faults as
// in arithmetic (system time ~ user time). TuneAllocator raises the mmap and trim
// thresholds so those blocks stay in the heap and are reused. Safe to call more than
// once; a no-op when another allocator (jemalloc via LD_PRELOAD) is in use.

namespace cohort::trainer {

void TuneAllocator();

}  // namespace cohort::trainer
