#include "worker/agent/event_translation.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "proto/time_convert.h"

namespace cohort::agent {
namespace {

using nlohmann::json;

// A log line longer than this is cut: a runaway print must not make a huge message.
constexpr size_t kMaxLogText = 16 * 1024;

std::string Cut(absl::string_view text) {
  if (text.size() <= kMaxLogText) return std::string(text);
  return absl::StrCat(text.substr(0, kMaxLogText), "... (cut)");
}

// Field readers that tolerate a missing or mistyped field (the defaults then).
int64_t Int(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  double v = it->get<double>();
  return std::isfinite(v) ? static_cast<int64_t>(v) : 0;
}

double Double(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  return it->get<double>();
}

std::string String(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

template <typename Message>
void AddMetrics(const json& j, Message* out) {
  auto it = j.find("metrics");
  if (it == j.end() || !it->is_object()) return;
  for (const auto& [name, value] : it->items()) {
    if (!value.is_number()) continue;
    v1::Metric* metric = out->add_metrics();
    metric->set_name(name);
    metric->set_value(value.template get<double>());
  }
}

v1::RankEvent Log(const v1::RankRef& rank, v1::LogLevel level, std::string text) {
  v1::RankEvent event;
  *event.mutable_rank() = rank;
  v1::LogLine* log = event.mutable_log();
  log->set_rank(rank.rank());
  log->set_level(level);
  log->set_text(std::move(text));
  return event;
}

// The house pattern: "YYYY-MM-DDTHH:MM:SS.mmm L name: text".
bool HousePattern(absl::string_view line) {
  return line.size() > 27 && line[4] == '-' && line[10] == 'T' && line[19] == '.' &&
         line[23] == ' ' && line[25] == ' ' && absl::ascii_isupper(line[24]);
}

}  // namespace

v1::LogLevel LogLevelOf(absl::string_view line) {
  if (HousePattern(line)) {
    switch (line[24]) {
      case 'T':
      case 'D':
        return v1::LOG_LEVEL_DEBUG;
      case 'W':
        return v1::LOG_LEVEL_WARNING;
      case 'E':
      case 'C':
        return v1::LOG_LEVEL_ERROR;
      default:
        return v1::LOG_LEVEL_INFO;
    }
  }
  if (absl::StrContains(line, "[error]") || absl::StrContains(line, "[critical]") ||
      absl::StrContains(line, ": error: ")) {
    return v1::LOG_LEVEL_ERROR;
  }
  if (absl::StrContains(line, "[warning]")) return v1::LOG_LEVEL_WARNING;
  if (absl::StrContains(line, "[debug]") || absl::StrContains(line, "[trace]")) {
    return v1::LOG_LEVEL_DEBUG;
  }
  return v1::LOG_LEVEL_INFO;
}

std::string LogTextOf(absl::string_view line) {
  line = absl::StripTrailingAsciiWhitespace(line);
  if (HousePattern(line)) {
    size_t colon = line.find(": ", 26);
    if (colon != absl::string_view::npos) return Cut(line.substr(colon + 2));
  }
  return Cut(line);
}

v1::RankEvent TranslateStderrLine(absl::string_view line, const v1::RankRef& rank) {
  return Log(rank, LogLevelOf(line), LogTextOf(line));
}

TrainerLine TranslateStdoutLine(absl::string_view line, const v1::RankRef& rank) {
  TrainerLine result;
  line = absl::StripAsciiWhitespace(line);
  if (line.empty()) return result;
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("event") || !j["event"].is_string()) {
    result.event = Log(rank, v1::LOG_LEVEL_WARNING,
                       absl::StrCat("the trainer printed a line that is not an event: ", Cut(line)));
    return result;
  }
  const std::string kind = j["event"].get<std::string>();
  v1::RankEvent event;
  *event.mutable_rank() = rank;
  if (kind == "start") {
    event.mutable_started()->set_steps_per_epoch(Int(j, "steps"));
    event.mutable_started()->set_samples(Int(j, "samples"));
  } else if (kind == "step") {
    v1::StepProgress* step = event.mutable_step();
    step->set_epoch(static_cast<int32_t>(Int(j, "epoch")));
    step->set_epochs(static_cast<int32_t>(Int(j, "epochs")));
    step->set_step(Int(j, "step"));
    step->set_steps(Int(j, "steps"));
    AddMetrics(j, step);
    step->set_samples_per_second(Double(j, "samples_per_second"));
  } else if (kind == "epoch_end") {
    v1::EpochEnd* epoch = event.mutable_epoch();
    epoch->set_epoch(static_cast<int32_t>(Int(j, "epoch")));
    epoch->set_epochs(static_cast<int32_t>(Int(j, "epochs")));
    AddMetrics(j, epoch);
    double seconds = Double(j, "seconds");
    if (std::isfinite(seconds) && seconds >= 0) {
      ToProto(absl::Seconds(seconds), epoch->mutable_duration());
    }
    epoch->set_samples_per_second(Double(j, "samples_per_second"));
  } else if (kind == "checkpoint") {
    std::string file = String(j, "file");
    if (!file.empty()) result.checkpoint_file = std::move(file);
    return result;
  } else if (kind == "error") {
    result.error_message = String(j, "message");
    return result;
  } else {
    return result;  // "done", and kinds a newer trainer may add
  }
  result.event = std::move(event);
  return result;
}

}  // namespace cohort::agent
