#pragma once

// The load scenario of issue 8 item 5, shared by bench/load_bench.cc (which prints its
// numbers) and tests/integration/load_test.cc (which asserts nothing was lost).
//
// Against a real cohort-server (its own process, data dir and loopback port):
//  1. Two steady simulated agents and one that flaps (bench/sim_worker.h) register; a
//     seed job runs through; GetJob is timed on an idle coordinator.
//  2. Then, all at once: `submits` SubmitJob calls in a burst from `submit_clients`
//     clients (each with an idempotency key; a failed call is retried with the same key,
//     and every 10th accepted submit is sent again as a client that lost the answer
//     would); `watchers` clients, each on its own connection, WatchJob the jobs
//     round-robin (watcher k takes the k-th, (k+watchers)-th, ... job), so every job
//     is watched and `watchers` streams are open at once; the flapping agent goes
//     silent past the lease TTL while it runs ranks, comes back, registers again, and
//     does so `flaps` times; a prober times GetJob the whole time.
//  3. Once every job has ended (or `drain_timeout` passed) it checks that nothing was
//     lost: every submit index is stored exactly once, under the id its client was given
//     (retries included); every watcher saw its jobs' events 1, 2, 3, ... with no gap,
//     each state change starting from the state before it, ending in a final state that
//     matches the stored job; every job ended SUCCEEDED, or FAILED with a reason; every
//     job that had an attempt on the flapping agent when it was lost was restarted
//     (RESTARTING, with the lost worker as the reason) and then ended; none is stuck.
//
// Every violation is a line in LoadReport::problems; the run itself never exits the
// process (except when the coordinator cannot start: bench_cluster.h).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace cohort::bench {

struct LoadOptions {
  int watchers = 200;
  int submits = 1000;
  int submit_clients = 8;
  int flaps = 3;
  absl::Duration lease_ttl = absl::Seconds(2);
  // How long each simulated rank trains: long enough that the jobs outlast the flaps
  // (24 slots, ~1,100 ranks: about 20 s), short enough for a test.
  absl::Duration run_time = absl::Milliseconds(400);
  int32_t slots_per_worker = 8;
  absl::Duration idle_probe = absl::Seconds(2);
  // Each GetJob of the prober must answer within this (else it counts as a stall).
  absl::Duration get_deadline = absl::Seconds(5);
  // A liveness bound, not a speed limit: about 25 s on a quiet 2-core machine, 140 s
  // seen with the machine's load average at 50.
  absl::Duration drain_timeout = absl::Seconds(480);
  // Extra cohort-server flags.
  std::vector<std::string> server_flags;
  // Progress lines on stderr.
  bool verbose = false;
};

struct LoadReport {
  std::vector<std::string> problems;  // empty: nothing lost, nothing stuck

  // GetJob latencies: idle (before the load) and under it; failures are stalls.
  std::vector<absl::Duration> get_idle, get_load;
  int64_t get_failures = 0;
  std::vector<absl::Duration> submit_latencies;  // accepted first submits
  absl::Duration burst_wall;                      // first submit to the last accepted one
  absl::Duration drain_wall;                      // first submit to every job ended
  int64_t submit_retries = 0;                     // calls repeated after an error
  int64_t duplicate_submits = 0;                  // deliberate re-sends of accepted submits
  int64_t jobs = 0, succeeded = 0, failed = 0, restarted = 0, hit_by_flap = 0;
  int64_t flaps = 0, flapper_registrations = 0, steady_registrations = 0;
  int64_t watch_streams = 0, watch_reconnects = 0, events_seen = 0;
  int32_t max_open_watches = 0;
  double server_cpu_seconds = 0;  // user + sys during the load phase
  int64_t server_threads_peak = 0;
  int64_t server_rss_peak_kib = 0;
};

LoadReport RunLoadScenario(const LoadOptions& options);

}  // namespace cohort::bench
