#include "worker/trainer/step_trace.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/chrome_trace.h"

namespace cohort::trainer {

void StepTrace::Add(Track track, std::string name, absl::Time start, absl::Time end, int epoch,
                    int64_t step) {
  if (spans_.size() >= max_spans_) {
    ++dropped_;
    return;
  }
  int64_t start_us = absl::ToUnixMicros(start);
  int64_t duration_us = std::max<int64_t>(0, absl::ToUnixMicros(end) - start_us);
  spans_.push_back({track, std::move(name), start_us, duration_us, epoch, step});
}

void StepTrace::AddStep(int epoch, int64_t step, const StepPhases& p, absl::Time end,
                        const std::vector<std::pair<absl::Time, absl::Time>>& buckets) {
  Add(Track::kCompute, "step", p.start, end, epoch, step);
  auto phase = [&](const char* name, absl::Time from, absl::Time to) {
    if (from != absl::InfinitePast() && to > from) Add(Track::kCompute, name, from, to);
  };
  phase("data", p.start, p.data_end);
  phase("forward", p.data_end, p.forward_end);
  phase("backward", p.forward_end, p.backward_end);
  phase("metrics", p.backward_end, p.reduce_start);
  phase("all-reduce wait", p.reduce_start, p.reduce_end);
  phase("optimizer", p.reduce_end, end);
  for (size_t i = 0; i < buckets.size(); ++i) {
    Add(Track::kAllReduce, absl::StrCat("bucket ", i), buckets[i].first, buckets[i].second);
  }
}

std::string StepTrace::Json() const {
  using nlohmann::json;
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", 0},
                    {"args", {{"name", absl::StrCat("rank ", rank_)}}}});
  events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank_}, {"tid", 0},
                    {"args", {{"sort_index", rank_}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", 0},
                    {"args", {{"name", "compute"}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", 1},
                    {"args", {{"name", "all-reduce"}}}});
  for (const Span& s : spans_) {
    json e = {{"name", s.name},
              {"cat", s.track == Track::kCompute ? "compute" : "all-reduce"},
              {"ph", "X"},
              {"ts", s.start_us},
              {"dur", s.duration_us},
              {"pid", rank_},
              {"tid", static_cast<int>(s.track)}};
    if (s.step > 0) e["args"] = {{"epoch", s.epoch}, {"step", s.step}};
    events.push_back(std::move(e));
  }
  json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  if (dropped_ > 0) trace["otherData"] = {{"dropped_spans", dropped_}};
  return trace.dump();
}

absl::Status StepTrace::Write(const std::string& path) const {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << Json() << "\n";
    if (!out.flush()) return absl::FailedPreconditionError(absl::StrCat("cannot write ", tmp));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

std::string RankTracePath(const std::string& dir, int rank) {
  return absl::StrCat(dir, "/rank-", rank, ".json");
}

absl::Status MergeRankTraces(const std::string& dir, const std::string& out_path) {
  std::vector<std::pair<std::string, std::string>> traces;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, "rank-") || !absl::EndsWith(name, ".json")) continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    traces.emplace_back(entry.path().string(), text.str());
  }
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  std::sort(traces.begin(), traces.end());
  absl::StatusOr<std::string> merged = MergeChromeTraces(traces);
  if (!merged.ok()) return merged.status();
  std::string tmp = out_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << *merged << "\n";
    if (!out.flush()) return absl::FailedPreconditionError(absl::StrCat("cannot write ", tmp));
  }
  std::filesystem::rename(tmp, out_path, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace cohort::trainer
