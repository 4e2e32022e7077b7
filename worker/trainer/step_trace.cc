#include "worker/trainer/step_trace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/chrome_trace.h"
#include "common/zip/atomic_file.h"

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
  phase(p.shared_sum ? "gradient sum" : "all-reduce wait", p.reduce_start, p.reduce_end);
  phase("optimizer", p.reduce_end, end);
  for (size_t i = 0; i < buckets.size(); ++i) {
    Add(Track::kAllReduce, absl::StrCat("bucket ", i), buckets[i].first, buckets[i].second);
  }
}

std::string StepTrace::Head() const {
  using nlohmann::json;
  json meta = json::array();
  meta.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", 0},
                  {"args", {{"name", absl::StrCat("rank ", rank_)}}}});
  meta.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank_}, {"tid", 0},
                  {"args", {{"sort_index", rank_}}}});
  meta.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", 0},
                  {"args", {{"name", "compute"}}}});
  meta.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", 1},
                  {"args", {{"name", "all-reduce"}}}});
  std::string text = meta.dump();
  text.pop_back();  // the closing ']': spans follow
  return absl::StrCat("{\"traceEvents\":", text);
}

std::string StepTrace::Tail() const {
  std::string tail = "],\"displayTimeUnit\":\"ms\"";
  if (dropped_ > 0) absl::StrAppend(&tail, ",\"otherData\":{\"dropped_spans\":", dropped_, "}");
  return tail + "}\n";
}

void StepTrace::AppendSpan(const Span& s, std::string& out) const {
  // By hand: through nlohmann::json objects, a span took ~4 us.
  absl::StrAppend(&out, ",{\"name\":", nlohmann::json(s.name).dump(), ",\"cat\":\"",
                  s.track == Track::kCompute ? "compute" : "all-reduce", "\",\"ph\":\"X\",\"ts\":",
                  s.start_us, ",\"dur\":", s.duration_us, ",\"pid\":", rank_,
                  ",\"tid\":", static_cast<int>(s.track));
  if (s.step > 0) absl::StrAppend(&out, ",\"args\":{\"epoch\":", s.epoch, ",\"step\":", s.step, "}");
  out += '}';
}

std::string StepTrace::Json() const {
  std::string text = Head();
  for (const Span& s : spans_) AppendSpan(s, text);
  return text + Tail();
}

namespace {

bool WriteAt(int fd, absl::string_view text, int64_t offset) {
  while (!text.empty()) {
    ssize_t n = pwrite(fd, text.data(), text.size(), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
    offset += n;
  }
  return true;
}

}  // namespace

absl::Status StepTrace::Write(const std::string& path) {
  if (path == written_path_) {
    // Append: the new spans over the old tail, then the tail again. A file that is not
    // what the last Write left (removed, or changed by someone else) is made anew.
    std::string text;
    for (size_t i = written_spans_; i < spans_.size(); ++i) AppendSpan(spans_[i], text);
    const int64_t spans_end = written_bytes_ + static_cast<int64_t>(text.size());
    text += Tail();
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    struct stat st;
    bool ok = fd >= 0 && fstat(fd, &st) == 0 && st.st_size == written_size_ &&
              WriteAt(fd, text, written_bytes_) &&
              ftruncate(fd, written_bytes_ + static_cast<off_t>(text.size())) == 0;
    if (fd >= 0) ok = close(fd) == 0 && ok;
    if (ok) {
      written_spans_ = spans_.size();
      written_size_ = written_bytes_ + static_cast<int64_t>(text.size());
      written_bytes_ = spans_end;
      return absl::OkStatus();
    }
  }
  written_path_.clear();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::string text = Head();
  for (const Span& s : spans_) AppendSpan(s, text);
  const int64_t spans_end = static_cast<int64_t>(text.size());
  text += Tail();
  if (absl::Status s = WriteFileAtomically(path, text); !s.ok()) return s;
  written_path_ = path;
  written_spans_ = spans_.size();
  written_bytes_ = spans_end;
  written_size_ = static_cast<int64_t>(text.size());
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
  return WriteFileAtomically(out_path, *merged + "\n");
}

}  // namespace cohort::trainer
