#include "common/metrics/registry.h"

#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "common/metrics/text_format.h"

namespace cohort::metrics {
namespace {

TEST_CASE("Values are written as Prometheus reads them", "[metrics]") {
  CHECK(FormatValue(0) == "0");
  CHECK(FormatValue(3) == "3");
  CHECK(FormatValue(-2.5) == "-2.5");
  CHECK(FormatValue(0.1) == "0.1");
  CHECK(FormatValue(1234567) == "1234567");
  CHECK(FormatValue(1e-6) == "1e-06");
  CHECK(FormatValue(2e21) == "2e+21");
  CHECK(FormatValue(1.0 / 0.0) == "+Inf");
  CHECK(FormatValue(-1.0 / 0.0) == "-Inf");
  CHECK(FormatValue(0.0 / 0.0) == "NaN");
  CHECK(std::stod(FormatValue(0.1 + 0.2)) == 0.1 + 0.2);
}

TEST_CASE("Help text and label values are escaped", "[metrics]") {
  CHECK(EscapeHelp("a\\b\nc\"d") == "a\\\\b\\nc\"d");
  CHECK(EscapeLabelValue("a\\b\nc\"d") == "a\\\\b\\nc\\\"d");
  CHECK(FormatLabels({"a", "b"}, {"x", "y\"z"}) == "{a=\"x\",b=\"y\\\"z\"}");
  CHECK(FormatLabels({}, {}) == "");
}

TEST_CASE("Names are checked", "[metrics]") {
  CHECK(IsValidMetricName("cohort_jobs"));
  CHECK(IsValidMetricName("a:b_c9"));
  CHECK_FALSE(IsValidMetricName(""));
  CHECK_FALSE(IsValidMetricName("9a"));
  CHECK_FALSE(IsValidMetricName("a-b"));
  CHECK(IsValidLabelName("state"));
  CHECK_FALSE(IsValidLabelName("__name"));
  CHECK_FALSE(IsValidLabelName("a:b"));

  Registry r;
  CHECK(r.AddCounter("bad-name", "x").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(r.AddGauge("g", "x", {"0bad"}).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(r.AddGauge("g", "x", {"a", "a"}).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(r.AddHistogram("h", "x", {"le"}, {1}).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(r.AddHistogram("h", "x", {}, {2, 1}).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(r.AddHistogram("h", "x", {}, {}).status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(r.AddGauge("g", "x").ok());
  CHECK(r.AddCounter("g", "x").status().code() == absl::StatusCode::kAlreadyExists);
}

TEST_CASE("The exposition of counters, gauges and histograms", "[metrics]") {
  Registry r;
  auto rpcs = r.AddCounter("cohort_rpcs_total", "RPCs handled,\nby method.", {"method", "code"});
  auto jobs = r.AddGauge("cohort_jobs", "Jobs by state.", {"state"});
  auto latency = r.AddHistogram("cohort_latency_seconds", "Latency.", {"method"}, {0.1, 1});
  auto up = r.AddGauge("cohort_up", "Always 1.");
  REQUIRE(rpcs.ok());
  REQUIRE(jobs.ok());
  REQUIRE(latency.ok());
  REQUIRE(up.ok());
  (*rpcs)->WithLabels({"Submit", "OK"}).Increment();
  (*rpcs)->WithLabels({"Submit", "OK"}).Increment(2);
  (*rpcs)->WithLabels({"Submit", "OK"}).Increment(-5);  // ignored: counters only go up
  (*rpcs)->WithLabels({"Cancel", "NOT_FOUND"}).Increment();
  (*jobs)->WithLabels({"queued"}).Set(4);
  (*jobs)->WithLabels({"a \"quoted\"\\state\n"}).Set(-1.5);
  (*up)->WithLabels({}).Set(1);
  for (double v : {0.05, 0.1, 0.5, 3.0}) (*latency)->WithLabels({"Submit"}).Observe(v);
  CHECK(r.TextFormat() ==
        "# HELP cohort_rpcs_total RPCs handled,\\nby method.\n"
        "# TYPE cohort_rpcs_total counter\n"
        "cohort_rpcs_total{method=\"Cancel\",code=\"NOT_FOUND\"} 1\n"
        "cohort_rpcs_total{method=\"Submit\",code=\"OK\"} 3\n"
        "# HELP cohort_jobs Jobs by state.\n"
        "# TYPE cohort_jobs gauge\n"
        "cohort_jobs{state=\"a \\\"quoted\\\"\\\\state\\n\"} -1.5\n"
        "cohort_jobs{state=\"queued\"} 4\n"
        "# HELP cohort_latency_seconds Latency.\n"
        "# TYPE cohort_latency_seconds histogram\n"
        "cohort_latency_seconds_bucket{method=\"Submit\",le=\"0.1\"} 2\n"
        "cohort_latency_seconds_bucket{method=\"Submit\",le=\"1\"} 3\n"
        "cohort_latency_seconds_bucket{method=\"Submit\",le=\"+Inf\"} 4\n"
        "cohort_latency_seconds_sum{method=\"Submit\"} 3.65\n"
        "cohort_latency_seconds_count{method=\"Submit\"} 4\n"
        "# HELP cohort_up Always 1.\n"
        "# TYPE cohort_up gauge\n"
        "cohort_up 1\n");
}

TEST_CASE("Collectors refresh gauges before every exposition", "[metrics]") {
  Registry r;
  auto jobs = r.AddGauge("jobs", "Jobs.", {"state"});
  REQUIRE(jobs.ok());
  int calls = 0;
  r.AddCollector([&] {
    ++calls;
    (*jobs)->Clear();
    (*jobs)->WithLabels({calls == 1 ? "queued" : "running"}).Set(calls);
  });
  CHECK(r.TextFormat().find("jobs{state=\"queued\"} 1\n") != std::string::npos);
  std::string second = r.TextFormat();
  CHECK(second.find("queued") == std::string::npos);
  CHECK(second.find("jobs{state=\"running\"} 2\n") != std::string::npos);
}

TEST_CASE("Metrics may be updated from many threads", "[metrics]") {
  Registry r;
  auto c = r.AddCounter("c_total", "C.", {"t"});
  auto h = r.AddHistogram("h_seconds", "H.", {}, LatencyBuckets());
  REQUIRE(c.ok());
  REQUIRE(h.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        (*c)->WithLabels({std::to_string(t % 2)}).Increment();
        (*h)->WithLabels({}).Observe(0.002);
        if (i % 1000 == 0) r.TextFormat();
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK((*c)->WithLabels({"0"}).value() == 20000);
  CHECK((*c)->WithLabels({"1"}).value() == 20000);
  Histogram::Snapshot s = (*h)->WithLabels({}).Take();
  CHECK(s.count == 40000);
  CHECK(s.cumulative[0] == 0);      // le 0.001
  CHECK(s.cumulative[1] == 40000);  // le 0.0025
}

TEST_CASE("A child can be removed", "[metrics]") {
  Registry r;
  auto g = r.AddGauge("g", "G.", {"rank"});
  REQUIRE(g.ok());
  (*g)->WithLabels({"0"}).Set(1);
  (*g)->WithLabels({"1"}).Set(2);
  (*g)->Remove({"0"});
  (*g)->Remove({"7"});  // none: nothing happens
  CHECK(r.TextFormat() == "# HELP g G.\n# TYPE g gauge\ng{rank=\"1\"} 2\n");
}

TEST_CASE("A wrong number of label values is padded or cut", "[metrics]") {
  Registry r;
  auto g = r.AddGauge("g", "G.", {"a", "b"});
  REQUIRE(g.ok());
  (*g)->WithLabels({"x"}).Set(1);
  (*g)->WithLabels({"x", "y", "z"}).Set(2);
  std::string text = r.TextFormat();
  CHECK(text.find("g{a=\"x\",b=\"\"} 1\n") != std::string::npos);
  CHECK(text.find("g{a=\"x\",b=\"y\"} 2\n") != std::string::npos);
}

}  // namespace
}  // namespace cohort::metrics
