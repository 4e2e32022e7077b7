#include "worker/trainer/allocator.h"

#include <malloc.h>

namespace cohort::trainer {

void TuneAllocator() {
  // glibc's ceiling for the mmap threshold on 64-bit systems is 32 MiB: blocks up to
  // that come from the heap; up to 2 GiB of free heap stay mapped.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 0x7fffffff);
  mallopt(M_TOP_PAD, 64 << 20);
}

}  // namespace cohort::trainer
