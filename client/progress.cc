#include "client/progress.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/job_format.h"
#include "client/keras_format.h"
#include "proto/time_convert.h"

namespace cohort::client {
namespace {

constexpr char kEraseLine[] = "\r\x1b[2K";

std::string LevelName(v1::LogLevel level) {
  switch (level) {
    case v1::LOG_LEVEL_DEBUG: return "DEBUG";
    case v1::LOG_LEVEL_WARNING: return "WARNING";
    case v1::LOG_LEVEL_ERROR: return "ERROR";
    default: return "INFO";
  }
}

std::string Source(int32_t rank) {
  return rank < 0 ? std::string("[coordinator]") : absl::StrCat("[rank ", rank, "]");
}

std::string SamplesPerSecond(double rate) {
  return rate > 0 ? absl::StrFormat(" - %.0f samples/s", rate) : "";
}

}  // namespace

ProgressRenderer::ProgressRenderer(std::string job_id, ProgressOptions options)
    : job_id_(std::move(job_id)), options_(options) {}

std::string ProgressRenderer::Render(const v1::JobEvent& event) {
  if (event.sequence() != 0 && event.sequence() <= last_sequence_) return "";
  if (event.sequence() != 0) last_sequence_ = event.sequence();
  if (event.has_state_change() && event.state_change().to() == v1::JOB_STATE_RESTARTING) {
    ++restarts_;
  }
  std::string out;
  switch (options_.style) {
    case ProgressStyle::kJson:
      if (!options_.logs_only || (!event.has_step() && !event.has_epoch())) {
        out = ToJsonLine(event) + "\n";
      }
      break;
    case ProgressStyle::kTty: out = RenderTty(event); break;
    case ProgressStyle::kPlain: out = RenderPlain(event); break;
    case ProgressStyle::kLogs: out = RenderLogs(event); break;
  }
  Track(event);
  return out;
}

std::string ProgressRenderer::Close() {
  if (open_bar_.empty()) return "";
  open_bar_.clear();
  return "\n";
}

void ProgressRenderer::Track(const v1::JobEvent& event) {
  const absl::Time time = FromProto(event.time());
  switch (event.kind_case()) {
    case v1::JobEvent::kStateChange:
      if (event.state_change().to() == v1::JOB_STATE_RUNNING) {
        epoch_start_ = time;
        have_epoch_start_ = true;
      } else {
        have_epoch_start_ = false;  // an attempt ended: the next starts afresh
      }
      break;
    case v1::JobEvent::kEpoch:
      epoch_start_ = time;
      have_epoch_start_ = true;
      break;
    case v1::JobEvent::kStep:
      if (event.step().steps() > 0) steps_ = event.step().steps();
      break;
    default:
      break;
  }
}

std::string ProgressRenderer::ClusterLine(const v1::JobEvent& event, bool all_logs) const {
  switch (event.kind_case()) {
    case v1::JobEvent::kStateChange: {
      const v1::StateChange& change = event.state_change();
      std::string line = absl::StrCat(job_id_, ": ", JobStateName(change.to()));
      if (change.to() == v1::JOB_STATE_RESTARTING && options_.max_restarts >= 0) {
        // The coordinator counts the failed attempt as a restart as it enters RESTARTING.
        absl::StrAppend(&line, " (restart ", restarts_, " of ", options_.max_restarts, ")");
      } else if (change.to() == v1::JOB_STATE_STARTING && event.attempt() > 0) {
        absl::StrAppend(&line, " (attempt ", event.attempt(), ")");
      }
      if (!change.reason().empty()) absl::StrAppend(&line, ": ", change.reason());
      return line;
    }
    case v1::JobEvent::kAttemptStarted: {
      const v1::AttemptStarted& a = event.attempt_started();
      const int ranks = a.placements_size();
      return absl::StrCat(job_id_, ": attempt ", a.attempt(), " on ", ranks,
                          ranks == 1 ? " rank: " : " ranks: ", FormatPlacements(a.placements()));
    }
    case v1::JobEvent::kLog: {
      const v1::LogLine& log = event.log();
      const bool loud = log.level() >= v1::LOG_LEVEL_WARNING;
      if (!loud && !all_logs) return "";
      if (!loud) return absl::StrCat(Source(log.rank()), " ", log.text());
      return absl::StrCat(Source(log.rank()), " ", LevelName(log.level()), ": ", log.text());
    }
    default:
      return "";
  }
}

std::string ProgressRenderer::EpochLine(const v1::EpochEnd& epoch, bool bar) const {
  const double seconds = absl::ToDoubleSeconds(FromProto(epoch.duration()));
  std::string line = absl::StrCat("Epoch ", epoch.epoch(), "/", epoch.epochs());
  if (steps_ > 0) {
    if (bar) {
      absl::StrAppend(&line, " ", RenderBar(steps_, steps_, options_.bar_width, options_.color),
                      " ", FormatStepCount(steps_, steps_));
    } else {
      absl::StrAppend(&line, " - ", FormatStepCount(steps_, steps_));
    }
    absl::StrAppend(&line, " - ", FormatElapsed(seconds), " ", FormatPerStep(seconds / steps_));
  } else {
    absl::StrAppend(&line, " - ", FormatElapsed(seconds));
  }
  absl::StrAppend(&line, FormatMetrics(epoch.metrics()), SamplesPerSecond(epoch.samples_per_second()));
  return line;
}

std::string ProgressRenderer::StepLine(const v1::JobEvent& event) {
  const v1::StepProgress& step = event.step();
  const int64_t steps = step.steps() > 0 ? step.steps() : steps_;
  const absl::Time now = FromProto(event.time());
  if (!have_epoch_start_) {
    // Joined mid-epoch (or no RUNNING event): count from the step's own time.
    const absl::Duration step_time = FromProto(step.step_time());
    epoch_start_ = now - step_time * static_cast<double>(std::max<int64_t>(1, step.step()));
    have_epoch_start_ = true;
  }
  const double elapsed = absl::ToDoubleSeconds(now - epoch_start_);
  double per_step = step.step() > 0 ? elapsed / step.step() : 0;
  if (per_step <= 0 && step.has_step_time()) per_step = absl::ToDoubleSeconds(FromProto(step.step_time()));
  std::string line = absl::StrCat("Epoch ", step.epoch(), "/", step.epochs(), " ",
                                  RenderBar(step.step(), steps, options_.bar_width, options_.color),
                                  " ", FormatStepCount(step.step(), steps), " - ",
                                  FormatElapsed(elapsed), " ", FormatPerStep(per_step),
                                  FormatMetrics(step.metrics()));
  return line;
}

std::string ProgressRenderer::PrintAbove(const std::string& line) const {
  if (open_bar_.empty()) return line + "\n";
  return absl::StrCat(kEraseLine, line, "\n", open_bar_);
}

std::string ProgressRenderer::RenderTty(const v1::JobEvent& event) {
  switch (event.kind_case()) {
    case v1::JobEvent::kStep: {
      std::string out;
      if (!open_bar_.empty() && bar_epoch_ != event.step().epoch()) out = "\n";  // no epoch end seen
      open_bar_ = StepLine(event);
      if (options_.columns > 1) open_bar_ = FitToColumns(open_bar_, options_.columns - 1);
      bar_epoch_ = event.step().epoch();
      return absl::StrCat(out, kEraseLine, open_bar_);
    }
    case v1::JobEvent::kEpoch: {
      const std::string line = EpochLine(event.epoch(), /*bar=*/true);
      open_bar_.clear();
      return absl::StrCat(kEraseLine, line, "\n");
    }
    default: {
      const std::string line = ClusterLine(event, /*all_logs=*/false);
      if (line.empty()) return "";
      if (event.kind_case() == v1::JobEvent::kStateChange && !open_bar_.empty()) {
        // The attempt ended mid-epoch: leave the bar where it stopped.
        std::string out = absl::StrCat("\n", line, "\n");
        open_bar_.clear();
        return out;
      }
      return PrintAbove(line);
    }
  }
}

std::string ProgressRenderer::RenderPlain(const v1::JobEvent& event) {
  switch (event.kind_case()) {
    case v1::JobEvent::kStep:
      return "";
    case v1::JobEvent::kEpoch:
      return EpochLine(event.epoch(), /*bar=*/false) + "\n";
    default: {
      const std::string line = ClusterLine(event, /*all_logs=*/false);
      return line.empty() ? "" : line + "\n";
    }
  }
}

std::string ProgressRenderer::RenderLogs(const v1::JobEvent& event) {
  if (event.kind_case() == v1::JobEvent::kStep || event.kind_case() == v1::JobEvent::kEpoch) {
    return "";
  }
  const std::string line = ClusterLine(event, /*all_logs=*/true);
  return line.empty() ? "" : line + "\n";
}

}  // namespace cohort::client
