// CpuCores counts the CPUs this process may run on, not the machine's.

#include "worker/trainer/cpu_threads.h"

#include <sched.h>

#include <catch2/catch.hpp>

namespace cohort::trainer {
namespace {

TEST_CASE("CpuCores follows the process' CPU affinity", "[cpu_threads]") {
  cpu_set_t all;
  REQUIRE(sched_getaffinity(0, sizeof(all), &all) == 0);
  CHECK(CpuCores() == CPU_COUNT(&all));
  CHECK(DefaultCpuThreads(1) == CPU_COUNT(&all));

  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
  const int confined = CpuCores();
  const int default_threads = DefaultCpuThreads(2);
  REQUIRE(sched_setaffinity(0, sizeof(all), &all) == 0);
  CHECK(confined == 1);
  CHECK(default_threads == 1);
}

}  // namespace
}  // namespace cohort::trainer
