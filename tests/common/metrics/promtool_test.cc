// The registry's exposition against Prometheus' own linter.

#include <catch2/catch.hpp>

#include "common/metrics/registry.h"
#include "tests/common/metrics/promtool.h"

namespace cohort::metrics {
namespace {

using cohort::testing::PromtoolPath;
using cohort::testing::PromtoolProblems;

TEST_CASE("promtool check metrics passes on every kind of metric", "[metrics][promtool]") {
  if (PromtoolPath().empty()) {
    WARN("skipped: promtool is not installed (Debian package prometheus; scripts/setup)");
    return;
  }
  Registry r;
  auto rpcs = r.AddCounter("cohort_rpcs_total", "RPCs handled \"by\" method\\code,\nsee docs.",
                           {"method", "code"});
  auto jobs = r.AddGauge("cohort_jobs", "Jobs by state.", {"state"});
  auto latency = r.AddHistogram("cohort_rpc_duration_seconds", "RPC latency.", {"method"},
                                LatencyBuckets());
  auto up = r.AddGauge("cohort_up", "1 while serving.");
  REQUIRE(rpcs.ok());
  REQUIRE(jobs.ok());
  REQUIRE(latency.ok());
  REQUIRE(up.ok());
  (*rpcs)->WithLabels({"cohort.v1.JobService/SubmitJob", "OK"}).Increment(3);
  (*jobs)->WithLabels({"odd \"value\" with \\ and\nnewline"}).Set(2);
  (*jobs)->WithLabels({"queued"}).Set(1e-7);
  (*jobs)->WithLabels({"huge"}).Set(3e30);
  (*jobs)->WithLabels({"nan"}).Set(0.0 / 0.0);
  (*jobs)->WithLabels({"inf"}).Set(1.0 / 0.0);
  (*latency)->WithLabels({"Submit"}).Observe(0.003);
  (*latency)->WithLabels({"Submit"}).Observe(100);
  (*up)->WithLabels({}).Set(1);
  std::string text = r.TextFormat();
  INFO(text);
  CHECK(PromtoolProblems(text) == "");
}

TEST_CASE("promtool is a judge that can fail", "[metrics][promtool]") {
  if (PromtoolPath().empty()) {
    WARN("skipped: promtool is not installed (Debian package prometheus; scripts/setup)");
    return;
  }
  // A counter without _total, and a label value with a raw quote.
  CHECK(PromtoolProblems("# HELP c C.\n# TYPE c counter\nc 1\n") != "");
  CHECK(PromtoolProblems("# HELP g G.\n# TYPE g gauge\ng{a=\"x\"y\"} 1\n") != "");
}

}  // namespace
}  // namespace cohort::metrics
