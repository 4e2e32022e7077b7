#pragma once

// Event translation: what a trainer process prints, turned into what the agent tells
// the coordinator (docs/job-protocol.md rule 5, worker/trainer/events.h).
//
//   stdout, one JSON object per line:
//     "start"     -> RankEvent.started {steps_per_epoch = "steps", samples}
//     "step"      -> RankEvent.step    (StepProgress; metrics in name order)
//     "epoch_end" -> RankEvent.epoch   (EpochEnd; "seconds" -> duration)
//     "checkpoint"-> not forwarded; TrainerLine.checkpoint_file names the file written
//     "error"     -> not forwarded; TrainerLine.error_message (for ReportExit)
//     "done" and unknown kinds -> nothing
//   stderr, each line -> RankEvent.log {rank, level, text}; the level comes from
//     spdlog's tags ("[warning]", "[error]", or the house pattern's level letter,
//     common/logging.cc), else INFO.
//
// A stdout line that is not an event object (garbage, a stray print) is not an error
// of the run: it becomes a WARNING log line that quotes it, so nothing is lost and
// nothing crashes. Pure functions, callable from any thread.

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "cohort/v1/worker_service.pb.h"

namespace cohort::agent {

struct TrainerLine {
  std::optional<v1::RankEvent> event;          // forward this to the coordinator
  std::optional<std::string> error_message;    // the trainer's "error" event
  std::optional<std::string> checkpoint_file;  // the path of a checkpoint just written
};

// One line of the trainer's stdout (without its newline).
TrainerLine TranslateStdoutLine(absl::string_view line, const v1::RankRef& rank);

// One line of the trainer's stderr (without its newline).
v1::RankEvent TranslateStderrLine(absl::string_view line, const v1::RankRef& rank);

// The level of a log line, and its text without the timestamp/level/logger prefix of
// the house pattern ("2026-01-02T03:04:05.678 W rank0: text" -> WARNING, "text").
v1::LogLevel LogLevelOf(absl::string_view line);
std::string LogTextOf(absl::string_view line);

}  // namespace cohort::agent
