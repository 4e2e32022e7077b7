#include "worker/agent/agent_metrics.h"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/version.h"

namespace cohort::agent {

struct AgentMetrics::Families {
  metrics::Family<metrics::Gauge>* samples_per_second;
  metrics::Family<metrics::Gauge>* step_seconds;
  metrics::Family<metrics::Gauge>* data_seconds;
  metrics::Family<metrics::Gauge>* all_reduce_seconds;
  metrics::Family<metrics::Gauge>* all_reduce_wait_seconds;
  metrics::Family<metrics::Gauge>* rss_bytes;
  metrics::Family<metrics::Gauge>* gpu_bytes;
  metrics::Family<metrics::Counter>* steps;
  metrics::Family<metrics::Counter>* all_reduce_bytes;
  metrics::Family<metrics::Gauge>* ranks;
};

namespace {

std::vector<std::string> Labels(const v1::RankRef& rank) {
  return {rank.job_id(), absl::StrCat(rank.attempt()), absl::StrCat(rank.rank())};
}

// A finite, non-negative number at `key`, or nothing.
bool Number(const nlohmann::json& j, const char* key, double* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return false;
  double v = it->get<double>();
  if (!(v >= 0) || v > 1e300) return false;
  *out = v;
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AgentMetrics>> AgentMetrics::Create() {
  std::unique_ptr<AgentMetrics> m(new AgentMetrics());
  if (absl::Status s = m->Register(); !s.ok()) return s;
  return m;
}

absl::StatusOr<std::unique_ptr<AgentMetrics>> AgentMetrics::Listen(const HostPort& address) {
  absl::StatusOr<std::unique_ptr<AgentMetrics>> m = Create();
  if (!m.ok()) return m.status();
  metrics::Registry* registry = &(*m)->registry_;
  absl::StatusOr<std::unique_ptr<metrics::MetricsHttpServer>> http = metrics::MetricsHttpServer::Start(
      {.listen = address}, [registry] { return registry->TextFormat(); });
  if (!http.ok()) return http.status();
  (*m)->http_ = std::move(*http);
  spdlog::info("metrics on http://{}:{}/metrics", address.host, (*m)->http_->port());
  return m;
}

AgentMetrics::~AgentMetrics() { Stop(); }

void AgentMetrics::Stop() {
  if (http_) http_->Stop();
}

absl::Status AgentMetrics::Register() {
  const std::vector<std::string> rank = {"job", "attempt", "rank"};
  auto gauge = [&](const char* name, const char* help, metrics::Family<metrics::Gauge>** out) {
    absl::StatusOr<metrics::Family<metrics::Gauge>*> f = registry_.AddGauge(name, help, rank);
    if (f.ok()) *out = *f;
    return f.status();
  };
  auto counter = [&](const char* name, const char* help, metrics::Family<metrics::Counter>** out) {
    absl::StatusOr<metrics::Family<metrics::Counter>*> f = registry_.AddCounter(name, help, rank);
    if (f.ok()) *out = *f;
    return f.status();
  };
  f_ = std::make_unique<Families>();
  for (const absl::Status& s : {
           gauge("cohort_rank_samples_per_second",
                 "Rows this rank trained per second, over its last window of steps.",
                 &f_->samples_per_second),
           gauge("cohort_rank_step_seconds", "Mean time of a training step (data to optimizer).",
                 &f_->step_seconds),
           gauge("cohort_rank_data_wait_seconds", "Mean time a step spent gathering its batch.",
                 &f_->data_seconds),
           gauge("cohort_rank_all_reduce_seconds",
                 "Mean time of a step's gradient all-reduce, first bucket to last.",
                 &f_->all_reduce_seconds),
           gauge("cohort_rank_all_reduce_wait_seconds",
                 "Mean time a step waited for its all-reduce after backward (not hidden).",
                 &f_->all_reduce_wait_seconds),
           gauge("cohort_rank_resident_memory_bytes", "Resident memory of the rank's trainer.",
                 &f_->rss_bytes),
           gauge("cohort_rank_gpu_memory_bytes",
                 "Memory in use on the rank's GPU (all processes on it); CUDA ranks only.",
                 &f_->gpu_bytes),
           counter("cohort_rank_steps_total", "Training steps this rank finished.", &f_->steps),
           counter("cohort_rank_all_reduce_bytes_total", "Bytes of gradients this rank all-reduced.",
                   &f_->all_reduce_bytes),
       }) {
    if (!s.ok()) return s;
  }
  absl::StatusOr<metrics::Family<metrics::Gauge>*> ranks =
      registry_.AddGauge("cohort_agent_ranks", "Ranks active on this worker.");
  if (!ranks.ok()) return ranks.status();
  f_->ranks = *ranks;
  f_->ranks->WithLabels({}).Set(0);
  absl::StatusOr<metrics::Family<metrics::Gauge>*> build =
      registry_.AddGauge("cohort_build_info", "The cohort-worker version; always 1.", {"version"});
  if (!build.ok()) return build.status();
  (*build)->WithLabels({kVersion}).Set(1);
  return absl::OkStatus();
}

void AgentMetrics::OnTrainerLine(const v1::RankRef& rank, absl::string_view line) {
  if (!absl::StrContains(line, "\"rank_stats\"")) return;
  nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (!j.is_object() || j.value("event", "") != "rank_stats") return;
  std::vector<std::string> labels = Labels(rank);
  double v = 0;
  if (Number(j, "samples_per_second", &v)) f_->samples_per_second->WithLabels(labels).Set(v);
  if (Number(j, "step_seconds", &v)) f_->step_seconds->WithLabels(labels).Set(v);
  if (Number(j, "data_seconds", &v)) f_->data_seconds->WithLabels(labels).Set(v);
  if (Number(j, "all_reduce_seconds", &v)) f_->all_reduce_seconds->WithLabels(labels).Set(v);
  if (Number(j, "all_reduce_wait_seconds", &v)) {
    f_->all_reduce_wait_seconds->WithLabels(labels).Set(v);
  }
  if (Number(j, "rss_bytes", &v)) f_->rss_bytes->WithLabels(labels).Set(v);
  if (Number(j, "gpu_memory_bytes", &v)) f_->gpu_bytes->WithLabels(labels).Set(v);
  if (Number(j, "steps", &v)) f_->steps->WithLabels(labels).Increment(v);
  if (Number(j, "all_reduce_bytes", &v)) f_->all_reduce_bytes->WithLabels(labels).Increment(v);
}

void AgentMetrics::RankStarted(const v1::RankRef&) { f_->ranks->WithLabels({}).Add(1); }

void AgentMetrics::RankEnded(const v1::RankRef& rank) {
  f_->ranks->WithLabels({}).Add(-1);
  std::vector<std::string> labels = Labels(rank);
  for (metrics::Family<metrics::Gauge>* g :
       {f_->samples_per_second, f_->step_seconds, f_->data_seconds, f_->all_reduce_seconds,
        f_->all_reduce_wait_seconds, f_->rss_bytes, f_->gpu_bytes}) {
    g->Remove(labels);
  }
  f_->steps->Remove(labels);
  f_->all_reduce_bytes->Remove(labels);
}

}  // namespace cohort::agent
