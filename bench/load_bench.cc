// load_bench: the coordinator under issue 8's load (bench/load_scenario.h): 200 clients
// watching jobs, 1,000 submits in a burst, a worker flapping its lease. Prints GetJob's
// latency idle and under the load, submit throughput, and whether anything was lost.
//
//   build/bench/load_bench [--watchers 200] [--submits 1000] [--flaps 3] [--verbose]
//
// Exits 1 when the scenario found anything lost or stuck (the lines say what).
// docs/benchmarks.md keeps a report.

#include <cstdio>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>

#include "bench/bench_cluster.h"
#include "bench/load_scenario.h"

namespace {

std::string Row(const char* what, const std::vector<absl::Duration>& samples) {
  using cohort::bench::QuantileMs;
  char line[256];
  std::snprintf(line, sizeof(line), "| GetJob %s | %zu | %.2f ms | %.2f ms | %.2f ms |\n", what,
                samples.size(), QuantileMs(samples, 0.5), QuantileMs(samples, 0.99),
                QuantileMs(samples, 1.0));
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"load_bench: the coordinator under 200 watchers, a 1,000-submit burst and a flapping worker"};
  cohort::bench::LoadOptions o;
  app.add_option("--watchers", o.watchers, "clients watching jobs at once")->capture_default_str();
  app.add_option("--submits", o.submits, "jobs submitted in the burst")->capture_default_str();
  app.add_option("--submit-clients", o.submit_clients, "concurrent submitting clients")
      ->capture_default_str();
  app.add_option("--flaps", o.flaps, "times the flapping worker loses its lease")
      ->capture_default_str();
  app.add_option("--server-flag", o.server_flags, "extra cohort-server flag (repeatable)");
  app.add_flag("--verbose", o.verbose, "progress on stderr");
  CLI11_PARSE(app, argc, argv);

  cohort::bench::LoadReport r = cohort::bench::RunLoadScenario(o);
  using cohort::bench::QuantileMs;
  std::printf("### Load: %d watchers, %d submits in a burst, a worker flapping %d times\n\n",
              o.watchers, o.submits, o.flaps);
  std::printf("| measure | samples | p50 | p99 | max |\n|---|--:|--:|--:|--:|\n");
  std::printf("%s", Row("idle (same run, before the load)", r.get_idle).c_str());
  std::printf("%s", Row("under the load", r.get_load).c_str());
  std::printf("| SubmitJob under the load | %zu | %.2f ms | %.2f ms | %.2f ms |\n\n",
              r.submit_latencies.size(), QuantileMs(r.submit_latencies, 0.5),
              QuantileMs(r.submit_latencies, 0.99), QuantileMs(r.submit_latencies, 1.0));
  double burst_s = absl::ToDoubleSeconds(r.burst_wall);
  std::printf("| measure | value |\n|---|--:|\n");
  std::printf("| submits accepted / in the burst's wall time | %zu in %.1f s = %.0f/s (%d clients) |\n",
              r.submit_latencies.size(), burst_s,
              burst_s > 0 ? static_cast<double>(r.submit_latencies.size()) / burst_s : 0.0,
              o.submit_clients);
  std::printf("| submits retried after an error / sent twice on purpose | %lld / %lld |\n",
              static_cast<long long>(r.submit_retries), static_cast<long long>(r.duplicate_submits));
  std::printf("| first submit to every job ended | %.1f s |\n", absl::ToDoubleSeconds(r.drain_wall));
  std::printf("| jobs: SUCCEEDED / FAILED / restarted at least once | %lld / %lld / %lld |\n",
              static_cast<long long>(r.succeeded), static_cast<long long>(r.failed),
              static_cast<long long>(r.restarted));
  std::printf("| flaps / jobs that lost an attempt with the flapping worker | %lld / %lld |\n",
              static_cast<long long>(r.flaps), static_cast<long long>(r.hit_by_flap));
  std::printf("| registrations: flapping worker / the two steady ones | %lld / %lld |\n",
              static_cast<long long>(r.flapper_registrations),
              static_cast<long long>(r.steady_registrations));
  std::printf("| watch streams open at once (max) / reconnects / events seen | %d / %lld / %lld |\n",
              r.max_open_watches, static_cast<long long>(r.watch_reconnects),
              static_cast<long long>(r.events_seen));
  std::printf("| GetJob calls that failed or missed the 5 s deadline | %lld |\n",
              static_cast<long long>(r.get_failures));
  std::printf("| coordinator CPU during the load (user+sys) | %.1f s |\n", r.server_cpu_seconds);
  std::printf("| coordinator threads / RSS (peak) | %lld / %.0f MiB |\n",
              static_cast<long long>(r.server_threads_peak), r.server_rss_peak_kib / 1024.0);
  std::printf("| nothing lost, nothing stuck | %s |\n\n", r.problems.empty() ? "yes" : "**NO**");
  for (const std::string& p : r.problems) std::printf("- %s\n", p.c_str());
  return r.problems.empty() ? 0 : 1;
}
