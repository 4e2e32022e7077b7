// The large-block cache behind LibTorch's CPU allocator: freed blocks are reused, and
// the blocks it keeps and those in use never come to more than twice the most in use.

#include "worker/trainer/allocator.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <c10/core/CPUAllocator.h>
#include <catch2/catch.hpp>

namespace cohort::trainer {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

c10::Allocator& Cache() {
  CacheLargeCpuBlocks();
  return *c10::GetCPUAllocator();
}

void Fill(const c10::DataPtr& block, size_t n) {
  std::memset(block.get(), 0x5a, n);  // writable, all of it
  REQUIRE(reinterpret_cast<uintptr_t>(block.get()) % 64 == 0);
}

void RequireBounded() {
  LargeBlockStats s = LargeCpuBlockStats();
  REQUIRE(s.in_use <= s.high_water);
  REQUIRE(s.in_use + s.cached <= 2 * s.high_water);
}

TEST_CASE("A freed large block goes to the next allocation it fits") {
  c10::Allocator& cache = Cache();
  void* first = nullptr;
  {
    c10::DataPtr a = cache.allocate(40 * kMiB);
    Fill(a, 40 * kMiB);
    first = a.get();
    REQUIRE(LargeCpuBlockStats().in_use >= 40 * kMiB);
  }
  REQUIRE(LargeCpuBlockStats().cached >= 40 * kMiB);
  c10::DataPtr b = cache.allocate(39 * kMiB);
  Fill(b, 39 * kMiB);
  REQUIRE(b.get() == first);
  // Freed through raw_deleter, as oneDNN's raw_deallocate does, it is kept too.
  void* raw = cache.raw_allocate(3 * kMiB);
  std::memset(raw, 1, 3 * kMiB);
  const size_t kept = LargeCpuBlockStats().cached;
  cache.raw_deallocate(raw);
  REQUIRE(LargeCpuBlockStats().cached == kept + 4 * kMiB);  // rounded up to 2 MiB
  RequireBounded();
}

TEST_CASE("Small blocks are not the cache's, and a block twice the size is not handed out") {
  c10::Allocator& cache = Cache();
  const LargeBlockStats before = LargeCpuBlockStats();
  {
    c10::DataPtr small = cache.allocate(kLargeCpuBlock - 1);
    Fill(small, kLargeCpuBlock - 1);
    REQUIRE(LargeCpuBlockStats().in_use == before.in_use);
  }
  // A small block freed the way oneDNN frees it, through raw_deleter: the fallback's.
  void* raw = cache.raw_allocate(4096);
  std::memset(raw, 1, 4096);
  cache.raw_deallocate(raw);
  REQUIRE(LargeCpuBlockStats().cached == before.cached);
  void* big = nullptr;
  {
    c10::DataPtr a = cache.allocate(64 * kMiB);
    big = a.get();
  }
  c10::DataPtr b = cache.allocate(30 * kMiB);  // 64 > 2 x 30: a fresh block
  Fill(b, 30 * kMiB);
  REQUIRE(b.get() != big);
  RequireBounded();
}

TEST_CASE("Kept blocks go back, largest first, before a fresh block would pass twice the most in use") {
  c10::Allocator& cache = Cache();
  void* small = nullptr;
  {
    c10::DataPtr a = cache.allocate(100 * kMiB);
    c10::DataPtr b = cache.allocate(100 * kMiB);
    c10::DataPtr c = cache.allocate(10 * kMiB);
    small = c.get();
  }
  const LargeBlockStats kept = LargeCpuBlockStats();
  REQUIRE(kept.cached >= 210 * kMiB);
  // A fresh block of a size none fits, while the kept ones stay idle: a 100 MiB block
  // goes back so that the total stays within twice the most in use; the 10 MiB one stays.
  std::vector<c10::DataPtr> held;
  held.push_back(cache.allocate(kept.high_water + 40 * kMiB));
  RequireBounded();
  REQUIRE(LargeCpuBlockStats().cached < kept.cached);
  REQUIRE(LargeCpuBlockStats().cached >= 10 * kMiB);
  {
    c10::DataPtr c = cache.allocate(10 * kMiB);
    REQUIRE(c.get() == small);
  }
  // More of them: still within the bound, whatever goes back.
  for (int i = 1; i < 6; ++i) {
    held.push_back(cache.allocate(kept.high_water + (40 + 20 * i) * kMiB));
    Fill(held.back(), 4096);
    RequireBounded();
  }
  held.clear();
  RequireBounded();
}

// The transparent-huge-page mode in force ("always", "madvise" or "never"), or "" where
// the kernel has none.
std::string ThpMode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(f, line);
  const size_t open = line.find('['), close = line.find(']');
  return open == std::string::npos || close == std::string::npos
             ? ""
             : line.substr(open + 1, close - open - 1);
}

// The "THPeligible" field of the mapping in /proc/self/smaps that holds `address`: 1
// when the kernel may back it with huge pages; -1 when there is no such line.
int ThpEligible(const void* address) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &begin, &end) == 2 &&
        line.find(':') > line.find('-')) {
      inside = begin <= a && a < end;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::atoi(line.c_str() + std::strlen("THPeligible:"));
    }
  }
  return -1;
}

TEST_CASE("Large blocks start on 2 MiB boundaries, their whole 2 MiB pages marked for huge pages") {
  c10::Allocator& cache = Cache();
  // Larger than any block ever in use, so that no kept block fits and this one is mapped
  // for it: whole 2 MiB pages, then half of one.
  const size_t whole = (LargeCpuBlockStats().high_water / (2 * kMiB) + 2) * 2 * kMiB;
  c10::DataPtr block = cache.allocate(whole + kMiB);
  const char* begin = static_cast<const char*>(block.get());
  std::memset(block.get(), 0x5a, 4096);
  REQUIRE(reinterpret_cast<uintptr_t>(begin) % (2 * kMiB) == 0);
  const std::string mode = ThpMode();
  INFO("transparent huge pages: '" << mode << "'");
  if (mode == "madvise" || mode == "always") {
    CHECK(ThpEligible(begin) == 1);
    CHECK(ThpEligible(begin + whole - 1) == 1);
    if (mode == "madvise") CHECK(ThpEligible(begin + whole) == 0);  // the partial page
  }
  RequireBounded();
}

}  // namespace
}  // namespace cohort::trainer
