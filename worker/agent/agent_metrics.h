#pragma once

// AgentMetrics: what cohort-worker serves on `--metrics-listen HOST:PORT` (GET /metrics,
// Prometheus text format; docs/observability.md lists every metric). Per rank running
// on this host, labelled {job, attempt, rank}, from the "rank_stats" events its trainer
// prints (worker/trainer/events.h) — each a window of steps:
//
//   cohort_rank_samples_per_second          this rank's rows per second
//   cohort_rank_step_seconds                mean step time of the window
//   cohort_rank_data_wait_seconds           mean time gathering the batch
//   cohort_rank_all_reduce_seconds          mean gradient all-reduce time
//   cohort_rank_all_reduce_wait_seconds     the part backward did not hide
//   cohort_rank_resident_memory_bytes       the trainer process's RSS
//   cohort_rank_gpu_memory_bytes            memory in use on its GPU (CUDA ranks only)
//   cohort_rank_steps_total                 (counter)
//   cohort_rank_all_reduce_bytes_total      (counter)
// and for the agent: cohort_agent_ranks (ranks active on this host) and
// cohort_build_info{version}. A rank's series go when it ends (RankEnded).
//
// Thread-safe: the ranks' threads call OnTrainerLine and RankEnded concurrently.

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cohort/v1/worker_service.pb.h"
#include "common/address.h"
#include "common/metrics/http_server.h"
#include "common/metrics/registry.h"

namespace cohort::agent {

class AgentMetrics {
 public:
  // Binds the endpoint and starts serving. UNAVAILABLE naming the address when busy.
  static absl::StatusOr<std::unique_ptr<AgentMetrics>> Listen(const HostPort& address);
  // Without an endpoint: for tests, which read TextFormat().
  static absl::StatusOr<std::unique_ptr<AgentMetrics>> Create();
  ~AgentMetrics();

  // One stdout line of a rank's trainer; lines other than "rank_stats" events are
  // ignored, as are malformed ones (event_translation.h reports those).
  void OnTrainerLine(const v1::RankRef& rank, absl::string_view line);
  void RankStarted(const v1::RankRef& rank);
  void RankEnded(const v1::RankRef& rank);

  std::string TextFormat() const { return registry_.TextFormat(); }
  int port() const { return http_ ? http_->port() : 0; }
  void Stop();

 private:
  AgentMetrics() = default;
  absl::Status Register();

  metrics::Registry registry_;
  struct Families;
  std::unique_ptr<Families> f_;
  std::unique_ptr<metrics::MetricsHttpServer> http_;
};

}  // namespace cohort::agent
