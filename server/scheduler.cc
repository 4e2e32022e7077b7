#include "server/scheduler.h"

#include <algorithm>
#include <numeric>
#include <optional>

namespace cohort::server {
namespace {

std::vector<int32_t>& FreeSlots(WorkerCapacity& w, SlotKind kind) {
  return kind == SlotKind::kCpu ? w.free_cpu_slots : w.free_gpus;
}

// Chooses workers and slots for `job`, taking them from `workers`; empty if it does
// not fit.
std::vector<RankPlacement> Place(const QueuedJob& job, std::vector<WorkerCapacity>& workers) {
  std::vector<size_t> order(workers.size());
  std::iota(order.begin(), order.end(), 0);
  auto free = [&](size_t i) { return FreeSlots(workers[i], job.kind).size(); };
  int64_t total = 0;
  for (size_t i : order) total += static_cast<int64_t>(free(i));
  if (total < job.ranks) return {};

  std::vector<size_t> chosen;
  // Best fit on one worker: the fullest that still holds the whole job.
  std::optional<size_t> single;
  for (size_t i : order) {
    if (free(i) >= static_cast<size_t>(job.ranks) && (!single || free(i) < free(*single) ||
                                                      (free(i) == free(*single) &&
                                                       workers[i].name < workers[*single].name))) {
      single = i;
    }
  }
  if (single) {
    chosen.push_back(*single);
  } else {
    // Fewest hosts: the emptiest workers first.
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return free(a) != free(b) ? free(a) > free(b) : workers[a].name < workers[b].name;
    });
    int64_t need = job.ranks;
    for (size_t i : order) {
      if (need <= 0) break;
      if (free(i) == 0) continue;
      chosen.push_back(i);
      need -= static_cast<int64_t>(free(i));
    }
  }
  std::vector<RankPlacement> ranks;
  for (size_t i : chosen) {
    std::vector<int32_t>& slots = FreeSlots(workers[i], job.kind);
    std::sort(slots.begin(), slots.end());
    size_t take = std::min(slots.size(), static_cast<size_t>(job.ranks) - ranks.size());
    for (size_t k = 0; k < take; ++k) {
      ranks.push_back({static_cast<int32_t>(ranks.size()), workers[i].name, slots[k]});
    }
    slots.erase(slots.begin(), slots.begin() + static_cast<std::ptrdiff_t>(take));
  }
  return ranks;
}

}  // namespace

std::vector<JobPlacement> Schedule(std::vector<QueuedJob> queue,
                                   std::vector<WorkerCapacity> workers) {
  std::stable_sort(queue.begin(), queue.end(), [](const QueuedJob& a, const QueuedJob& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.sequence < b.sequence;
  });
  std::vector<JobPlacement> out;
  bool blocked[2] = {false, false};
  for (const QueuedJob& job : queue) {
    bool& kind_blocked = blocked[job.kind == SlotKind::kCpu ? 0 : 1];
    if (kind_blocked || job.ranks <= 0) continue;
    std::vector<RankPlacement> ranks = Place(job, workers);
    if (ranks.empty()) {
      kind_blocked = true;
      continue;
    }
    out.push_back({job.id, std::move(ranks)});
  }
  return out;
}

bool CanEverFit(const QueuedJob& job, const std::vector<WorkerCapacity>& workers) {
  int64_t total = 0;
  for (const WorkerCapacity& w : workers) {
    total += job.kind == SlotKind::kCpu ? w.total_cpu_slots : w.total_gpus;
  }
  return job.ranks >= 1 && total >= job.ranks;
}

}  // namespace cohort::server
