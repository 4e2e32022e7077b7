#pragma once

// Train: runs one rank of a training job (the standalone `cohort-worker train`, and the
// processes the agent launches).
//
// Rank 0 reads the model and checkpoints and writes `model.keras`, `history.json` and
// checkpoints into `out_dir`; every rank reads its own rows of the data. Ranks join
// through `store` (a FileStore for standalone runs, the coordinator's rendezvous under
// the agent) in the namespace `rendezvous_prefix`, and keep their replicas identical:
// rank 0's initial (or resumed) state is broadcast, gradients are summed in buckets
// while backward runs. A failure of any rank (a crash, a NaN, a collective timeout)
// makes every rank return an error within `collective_timeout`.
//
// Torch-free header: callers need not compile LibTorch's headers.

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/job/job_spec.h"
#include "worker/trainer/collective/store.h"

namespace cohort::trainer {

struct TrainOptions {
  job::JobSpec spec;
  int rank = 0;
  int world = 1;
  collective::Store* store = nullptr;  // required when world > 1; not owned
  std::string rendezvous_prefix = "cohort";
  std::string out_dir;
  job::Device device = job::Device::kCpu;
  bool resume = false;
  // LibTorch intra-op threads; 0: the machine's cores divided among the ranks.
  int threads = 0;
  absl::Duration collective_timeout = absl::Seconds(60);
  // The address this rank's Gloo listens on (reachable by the other ranks).
  std::string hostname = "127.0.0.1";
  std::FILE* events = stdout;  // JSON lines (worker/trainer/events.h); not owned
  absl::Duration step_event_interval = absl::Milliseconds(250);
  // Record every step's phases (worker/trainer/step_trace.h) into
  // out_dir/trace/rank-<rank>.json, rewritten at each epoch's end and when the run
  // fails (a run killed mid-epoch keeps its last complete epochs); rank 0 merges the
  // rank files it sees there into out_dir/trace.json when the run ends.
  bool trace = false;
  // Record LibTorch's profile of this epoch (counted from 1; 0: none) into
  // out_dir/profile/rank-<rank>.json (Chrome trace format; written whole or not at
  // all, when the epoch ends): every operator on the rank's threads, and Cohort's own
  // loops (named cohort::...). Nothing when a resumed run starts past that epoch.
  int profile_epoch = 0;
  // Train through LibTorch's autograd even where the hand-written DenseGraph step
  // covers the model (to compare the two, or to rule DenseGraph out).
  bool autograd = false;
  // Ranks on one machine keep a replica of the model each and all-reduce the gradients,
  // as ranks on several machines do, instead of sharing one copy (shared_replica.h).
  bool replica_per_rank = false;
};

absl::Status Train(const TrainOptions& options);

}  // namespace cohort::trainer
