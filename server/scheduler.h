#pragma once

// The scheduler: a pure function from the queue and the free slots to placements.
//
// Gang scheduling: a job needs `ranks` slots of its device type (CPU slots, or GPUs)
// and is placed whole or not at all. Jobs are considered by priority (higher first),
// then by submission order. Packing: a job that fits on one worker goes to the worker
// with the fewest free slots that still fits it (best fit, leaving large holes for
// large jobs); a job that needs several workers takes the workers with the most free
// slots first, so it spans as few hosts as possible. A job that does not fit now
// blocks the jobs behind it that need the same device type (no backfilling past it,
// so a large job is never starved by a stream of small ones); jobs of the other device
// type are still placed.
//
// CanEverFit tells, at submit, whether the cluster's total capacity (free or not) could
// ever hold the job.

#include <cstdint>
#include <string>
#include <vector>

namespace cohort::server {

enum class SlotKind { kCpu, kGpu };

struct QueuedJob {
  std::string id;
  int32_t priority = 0;
  int64_t sequence = 0;  // submission order: lower first among equal priorities
  int32_t ranks = 1;
  SlotKind kind = SlotKind::kCpu;
};

struct WorkerCapacity {
  std::string name;
  std::vector<int32_t> free_cpu_slots;  // slot indices
  std::vector<int32_t> free_gpus;       // GPU indices
  int32_t total_cpu_slots = 0;
  int32_t total_gpus = 0;
};

struct RankPlacement {
  int32_t rank = 0;
  std::string worker;
  int32_t slot = 0;  // CPU slot or GPU index on that worker
};

struct JobPlacement {
  std::string job_id;
  std::vector<RankPlacement> ranks;  // rank 0 first; ranks of one worker are consecutive
};

std::vector<JobPlacement> Schedule(std::vector<QueuedJob> queue,
                                   std::vector<WorkerCapacity> workers);

bool CanEverFit(const QueuedJob& job, const std::vector<WorkerCapacity>& workers);

}  // namespace cohort::server
