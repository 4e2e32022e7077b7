#include "server/scheduler.h"

#include <catch2/catch.hpp>

namespace cohort::server {
namespace {

WorkerCapacity Cpu(const std::string& name, int free, int total = -1) {
  WorkerCapacity w;
  w.name = name;
  for (int i = 0; i < free; ++i) w.free_cpu_slots.push_back(i);
  w.total_cpu_slots = total < 0 ? free : total;
  return w;
}

QueuedJob Job(const std::string& id, int ranks, int priority = 0, int64_t seq = 0,
              SlotKind kind = SlotKind::kCpu) {
  return {id, priority, seq, ranks, kind};
}

std::vector<std::string> Workers(const JobPlacement& p) {
  std::vector<std::string> out;
  for (const auto& r : p.ranks) out.push_back(r.worker);
  return out;
}

TEST_CASE("A job is placed whole or not at all", "[scheduler]") {
  auto placed = Schedule({Job("big", 3)}, {Cpu("a", 1), Cpu("b", 1)});
  CHECK(placed.empty());
  placed = Schedule({Job("two", 2)}, {Cpu("a", 1), Cpu("b", 1)});
  REQUIRE(placed.size() == 1);
  CHECK(Workers(placed[0]) == std::vector<std::string>{"a", "b"});
  CHECK(placed[0].ranks[0].rank == 0);
  CHECK(placed[0].ranks[1].rank == 1);
}

TEST_CASE("Ranks pack onto as few hosts as possible, best fit first", "[scheduler]") {
  // Fits on one host: the fullest host that holds it (b), not the emptiest (c).
  auto placed = Schedule({Job("j", 2)}, {Cpu("a", 1), Cpu("b", 2), Cpu("c", 4)});
  REQUIRE(placed.size() == 1);
  CHECK(Workers(placed[0]) == std::vector<std::string>{"b", "b"});
  CHECK(placed[0].ranks[0].slot == 0);
  CHECK(placed[0].ranks[1].slot == 1);
  // Needs two hosts: the emptiest first.
  placed = Schedule({Job("j", 5)}, {Cpu("a", 1), Cpu("b", 2), Cpu("c", 4)});
  REQUIRE(placed.size() == 1);
  CHECK(Workers(placed[0]) == std::vector<std::string>{"c", "c", "c", "c", "b"});
}

TEST_CASE("Higher priority first, then submission order", "[scheduler]") {
  auto placed = Schedule({Job("old-low", 1, 0, 1), Job("high", 1, 5, 3), Job("new-low", 1, 0, 2)},
                         {Cpu("a", 2)});
  REQUIRE(placed.size() == 2);
  CHECK(placed[0].job_id == "high");
  CHECK(placed[1].job_id == "old-low");
}

TEST_CASE("A job that does not fit blocks smaller ones of its kind, not others",
          "[scheduler]") {
  WorkerCapacity gpu;
  gpu.name = "g";
  gpu.free_gpus = {0};
  gpu.total_gpus = 1;
  auto placed = Schedule({Job("big", 3, 0, 1), Job("small", 1, 0, 2),
                          Job("gpu", 1, 0, 3, SlotKind::kGpu)},
                         {Cpu("a", 2), gpu});
  REQUIRE(placed.size() == 1);
  CHECK(placed[0].job_id == "gpu");
  CHECK(placed[0].ranks[0].worker == "g");
}

TEST_CASE("Slots taken by one placement are not given to the next", "[scheduler]") {
  auto placed = Schedule({Job("j1", 1, 0, 1), Job("j2", 1, 0, 2), Job("j3", 1, 0, 3)},
                         {Cpu("a", 1), Cpu("b", 1)});
  REQUIRE(placed.size() == 2);
  CHECK(placed[0].ranks[0].worker != placed[1].ranks[0].worker);
}

TEST_CASE("CanEverFit counts the whole cluster, busy slots included", "[scheduler]") {
  std::vector<WorkerCapacity> cluster{Cpu("a", 0, 2), Cpu("b", 1, 2)};
  CHECK(CanEverFit(Job("j", 4), cluster));
  CHECK_FALSE(CanEverFit(Job("j", 5), cluster));
  CHECK_FALSE(CanEverFit(Job("g", 1, 0, 0, SlotKind::kGpu), cluster));
  CHECK_FALSE(CanEverFit(Job("zero", 0), cluster));
}

}  // namespace
}  // namespace cohort::server
