// The agent's metrics from its trainers' rank_stats events, judged by promtool too.

#include "worker/agent/agent_metrics.h"

#include <string>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "tests/common/metrics/promtool.h"

namespace cohort::agent {
namespace {

v1::RankRef Rank(const std::string& job, int attempt, int rank) {
  v1::RankRef r;
  r.set_job_id(job);
  r.set_attempt(attempt);
  r.set_rank(rank);
  return r;
}

constexpr char kStats[] =
    R"({"event":"rank_stats","time":1.0,"rank":0,"epoch":1,"step":10,"steps":10,"rows":320,)"
    R"("samples_per_second":1600.5,"step_seconds":0.02,"data_seconds":0.001,)"
    R"("all_reduce_seconds":0.004,"all_reduce_wait_seconds":0.0005,"all_reduce_bytes":4000,)"
    R"("rss_bytes":123456789})";

TEST_CASE("rank_stats events become per-rank metrics", "[agent][metrics]") {
  auto m = AgentMetrics::Create();
  REQUIRE(m.ok());
  v1::RankRef r0 = Rank("job-1", 2, 0), r1 = Rank("job-1", 2, 1);
  (*m)->RankStarted(r0);
  (*m)->RankStarted(r1);
  (*m)->OnTrainerLine(r0, kStats);
  (*m)->OnTrainerLine(r0, kStats);  // a second window: counters add up, gauges are replaced
  (*m)->OnTrainerLine(r1, R"({"event":"step","epoch":1})");  // other events: ignored
  (*m)->OnTrainerLine(r1, "garbage with \"rank_stats\" in it");
  (*m)->OnTrainerLine(r1, R"({"event":"rank_stats","steps":-5,"step_seconds":"fast"})");
  std::string text = (*m)->TextFormat();
  INFO(text);
  const std::string labels = "{job=\"job-1\",attempt=\"2\",rank=\"0\"}";
  CHECK(absl::StrContains(text, "cohort_rank_samples_per_second" + labels + " 1600.5\n"));
  CHECK(absl::StrContains(text, "cohort_rank_step_seconds" + labels + " 0.02\n"));
  CHECK(absl::StrContains(text, "cohort_rank_data_wait_seconds" + labels + " 0.001\n"));
  CHECK(absl::StrContains(text, "cohort_rank_all_reduce_seconds" + labels + " 0.004\n"));
  CHECK(absl::StrContains(text, "cohort_rank_all_reduce_wait_seconds" + labels + " 0.0005\n"));
  CHECK(absl::StrContains(text, "cohort_rank_resident_memory_bytes" + labels + " 123456789\n"));
  CHECK(absl::StrContains(text, "cohort_rank_steps_total" + labels + " 20\n"));
  CHECK(absl::StrContains(text, "cohort_rank_all_reduce_bytes_total" + labels + " 8000\n"));
  CHECK(absl::StrContains(text, "cohort_agent_ranks 2\n"));
  CHECK_FALSE(absl::StrContains(text, "rank=\"1\""));  // nothing valid arrived for rank 1
  CHECK_FALSE(absl::StrContains(text, "cohort_rank_gpu_memory_bytes{"));  // a CPU rank

  if (cohort::testing::PromtoolPath().empty()) {
    WARN("skipped the promtool check: promtool is not installed (Debian package prometheus)");
  } else {
    CHECK(cohort::testing::PromtoolProblems(text) == "");
  }

  (*m)->RankEnded(r0);
  (*m)->RankEnded(r1);
  text = (*m)->TextFormat();
  CHECK_FALSE(absl::StrContains(text, "job=\"job-1\""));
  CHECK(absl::StrContains(text, "cohort_agent_ranks 0\n"));
}

TEST_CASE("The agent's endpoint serves the metrics", "[agent][metrics]") {
  auto m = AgentMetrics::Listen({"127.0.0.1", 0});
  REQUIRE(m.ok());
  CHECK((*m)->port() > 0);
  (*m)->Stop();
}

}  // namespace
}  // namespace cohort::agent
