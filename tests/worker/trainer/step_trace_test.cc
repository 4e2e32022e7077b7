// StepTrace's file: complete after every Write, and only the spans added since the last
// Write to the same path are written again (the earlier bytes are left as they are).

#include "worker/trainer/step_trace.h"

#include <cstdio>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "absl/time/time.h"
#include "tests/support/temp_dir.h"

namespace cohort::trainer {
namespace {

using cohort::testing::ReadFile;
using cohort::testing::TempDir;
using cohort::testing::WriteFile;

const absl::Time kT0 = absl::FromUnixMicros(1'700'000'000'000'000);

// `count` steps, each with a data, forward and backward phase and one bucket.
void AddSteps(StepTrace& trace, int epoch, int count) {
  for (int s = 1; s <= count; ++s) {
    absl::Time start = kT0 + absl::Milliseconds(epoch * 1000 + s * 10);
    StepPhases p{.start = start,
                 .data_end = start + absl::Microseconds(100),
                 .forward_end = start + absl::Microseconds(300),
                 .backward_end = start + absl::Microseconds(600),
                 .reduce_start = start + absl::Microseconds(650),
                 .reduce_end = start + absl::Microseconds(700)};
    trace.AddStep(epoch, s, p, start + absl::Microseconds(900),
                  {{start + absl::Microseconds(500), start + absl::Microseconds(700)}});
  }
}

// The steps in a trace file, as (epoch, step) pairs in order; fails on invalid JSON.
std::vector<std::pair<int, int>> Steps(const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(ReadFile(path));
  std::vector<std::pair<int, int>> steps;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("name") == "step") steps.emplace_back(e["args"]["epoch"], e["args"]["step"]);
  }
  return steps;
}

TEST_CASE("Each Write leaves a complete trace, appending what is new", "[trainer][trace]") {
  TempDir dir;
  const std::string path = dir.File("trace/rank-0.json");
  StepTrace trace(0);
  AddSteps(trace, 1, 3);
  REQUIRE(trace.Write(path).ok());
  REQUIRE(ReadFile(path) == trace.Json());
  REQUIRE(Steps(path).size() == 3);

  // Mark a byte of the first epoch's spans without changing the file's size: an append
  // leaves it, a rewrite would not.
  std::string text = ReadFile(path);
  const size_t at = text.find("\"epoch\":1,\"step\":2");
  REQUIRE(at != std::string::npos);
  text[at + std::string("\"epoch\":1,\"step\":").size()] = '7';
  WriteFile(path, text);

  AddSteps(trace, 2, 2);
  REQUIRE(trace.Write(path).ok());
  std::vector<std::pair<int, int>> steps = Steps(path);
  REQUIRE(steps == std::vector<std::pair<int, int>>{{1, 1}, {1, 7}, {1, 3}, {2, 1}, {2, 2}});
  REQUIRE(trace.Write(path).ok());  // nothing new: still the same, complete file
  REQUIRE(Steps(path) == steps);
}

TEST_CASE("A trace file changed or removed behind the writer is made anew", "[trainer][trace]") {
  TempDir dir;
  const std::string path = dir.File("rank-1.json");
  StepTrace trace(1);
  AddSteps(trace, 1, 2);
  REQUIRE(trace.Write(path).ok());

  WriteFile(path, "{}");  // another size: not what the writer left
  AddSteps(trace, 2, 1);
  REQUIRE(trace.Write(path).ok());
  REQUIRE(ReadFile(path) == trace.Json());

  REQUIRE(std::remove(path.c_str()) == 0);
  AddSteps(trace, 3, 1);
  REQUIRE(trace.Write(path).ok());
  REQUIRE(ReadFile(path) == trace.Json());
  REQUIRE(Steps(path).size() == 4);

  // Another path gets the whole trace.
  REQUIRE(trace.Write(dir.File("copy.json")).ok());
  REQUIRE(ReadFile(dir.File("copy.json")) == trace.Json());
}

TEST_CASE("Spans beyond the limit are counted in the appended file", "[trainer][trace]") {
  TempDir dir;
  const std::string path = dir.File("rank-0.json");
  StepTrace trace(0, /*max_spans=*/20);  // 8 spans a step: 7 phases and a bucket
  AddSteps(trace, 1, 2);
  REQUIRE(trace.Write(path).ok());
  AddSteps(trace, 2, 2);
  REQUIRE(trace.Write(path).ok());
  nlohmann::json j = nlohmann::json::parse(ReadFile(path));
  REQUIRE(trace.spans() == 20);
  REQUIRE(j["otherData"]["dropped_spans"] == 4 * 8 - 20);
  REQUIRE(j["traceEvents"].size() == 4 + 20);  // 4 metadata events
  REQUIRE(ReadFile(path) == trace.Json());
}

}  // namespace
}  // namespace cohort::trainer
