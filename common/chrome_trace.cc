#include "common/chrome_trace.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace cohort {

absl::StatusOr<std::string> MergeChromeTraces(
    const std::vector<std::pair<std::string, std::string>>& traces) {
  nlohmann::json events = nlohmann::json::array();
  int64_t dropped = 0;
  for (const auto& [name, text] : traces) {
    nlohmann::json trace = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    const nlohmann::json* list = nullptr;
    if (trace.is_array()) {
      list = &trace;
    } else if (trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array()) {
      list = &trace["traceEvents"];
      if (trace.contains("otherData") && trace["otherData"].contains("dropped_spans") &&
          trace["otherData"]["dropped_spans"].is_number_integer()) {
        dropped += trace["otherData"]["dropped_spans"].get<int64_t>();
      }
    }
    if (list == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": not a Chrome trace (JSON with a \"traceEvents\" array)"));
    }
    for (const nlohmann::json& e : *list) events.push_back(e);
  }
  nlohmann::json merged = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  if (dropped > 0) merged["otherData"] = {{"dropped_spans", dropped}};
  return merged.dump();
}

}  // namespace cohort
