#include "common/chrome_trace.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace cohort {
namespace {

TEST_CASE("Chrome traces merge into one list of events", "[trace]") {
  absl::StatusOr<std::string> merged = MergeChromeTraces({
      {"rank-0.json", R"({"traceEvents":[{"name":"a","ph":"X","pid":0,"tid":0,"ts":1,"dur":2}]})"},
      {"rank-1.json", R"({"traceEvents":[{"name":"b","ph":"X","pid":1,"tid":0,"ts":1,"dur":2}],)"
                      R"("otherData":{"dropped_spans":3}})"},
      {"bare.json", R"([{"name":"c","ph":"X","pid":2,"tid":0,"ts":1,"dur":2}])"},
  });
  REQUIRE(merged.ok());
  nlohmann::json j = nlohmann::json::parse(*merged);
  REQUIRE(j["traceEvents"].size() == 3);
  CHECK(j["traceEvents"][0]["name"] == "a");
  CHECK(j["traceEvents"][1]["pid"] == 1);
  CHECK(j["traceEvents"][2]["name"] == "c");
  CHECK(j["otherData"]["dropped_spans"] == 3);
}

TEST_CASE("An input that is not a trace is named", "[trace]") {
  for (const char* text : {"not json", "{}", R"({"traceEvents":7})"}) {
    absl::StatusOr<std::string> merged = MergeChromeTraces({{"good", "[]"}, {"rank-9.json", text}});
    REQUIRE_FALSE(merged.ok());
    CHECK(merged.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(merged.status().message().find("rank-9.json") != absl::string_view::npos);
  }
}

}  // namespace
}  // namespace cohort
