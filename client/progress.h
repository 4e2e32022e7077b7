#pragma once

// What `cohort watch` (and `submit --follow`, `logs`) prints for a job's events: a pure
// translation from the event stream to text, so every style is unit-tested without a
// terminal or a coordinator. The caller writes the returned text to stdout as is.
//
// Styles:
//   kTty    Keras' progress on a terminal. Each epoch is one line redrawn in place
//           ("\r" + erase line) as steps arrive,
//             Epoch 3/10 ━━━━━━━━━━────────── 117/234 - 1s 12ms/step - loss: 0.3300
//           and left standing at the epoch's end with its validation metrics and the
//           job's samples/s. Cluster lines (state changes, attempts and where their
//           ranks run, restarts, rank logs at WARNING and ERROR) are printed above the
//           bar, which is then redrawn.
//   kPlain  For pipes and files: no redraws, no step lines; one line per epoch end
//           ("Epoch 3/10 - 234/234 - 3s 12ms/step - ..."), plus the cluster lines.
//   kJson   One JSON object per event per line (the JobEvent message, proto field
//           names, enums by name); nothing else.
//   kLogs   `cohort logs`: every rank log line (all levels), state changes and attempts.
//
// Times (elapsed, ms/step) come from the events' timestamps and durations, never from
// a clock, so replaying stored events draws what a live watcher saw. An epoch starts at
// the attempt's change to RUNNING or at the previous epoch's end.
//
// Thread safety: one thread uses a ProgressRenderer.

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "cohort/v1/types.pb.h"

namespace cohort::client {

enum class ProgressStyle { kTty, kPlain, kJson, kLogs };

struct ProgressOptions {
  ProgressStyle style = ProgressStyle::kPlain;
  bool color = false;  // kTty: a green bar as Keras draws it
  int bar_width = 20;  // Keras' width
  // kTty: the terminal's width; the redrawn bar line is cut to one column less so it
  // never wraps. 0: unknown, no cut.
  int columns = 0;
  // spec.max_restarts of the job, for "restart 1 of 3"; -1 when unknown.
  int max_restarts = -1;
  // kJson: only the events kLogs shows (log lines, state changes, attempts).
  bool logs_only = false;
};

class ProgressRenderer {
 public:
  ProgressRenderer(std::string job_id, ProgressOptions options);

  // The text for one event; empty when the style shows nothing for it. Events must come
  // in sequence order; one seen before (a replay after a reconnect) gives nothing.
  std::string Render(const v1::JobEvent& event);

  // Ends the output cleanly: on a TTY a bar still open gets its newline. Call before
  // printing anything else (an error, a detach message) and at the end.
  std::string Close();

  // The sequence number of the last event rendered (0 before any): where a reconnected
  // stream resumes.
  int64_t last_sequence() const { return last_sequence_; }

 private:
  std::string RenderTty(const v1::JobEvent& event);
  std::string RenderPlain(const v1::JobEvent& event);
  std::string RenderLogs(const v1::JobEvent& event);
  // The cluster line for a state change, attempt or log line; empty for none.
  std::string ClusterLine(const v1::JobEvent& event, bool all_logs) const;
  std::string StepLine(const v1::JobEvent& event);
  std::string EpochLine(const v1::EpochEnd& epoch, bool bar) const;
  // A permanent line on a TTY: erases the open bar, prints the line, redraws the bar.
  std::string PrintAbove(const std::string& line) const;
  void Track(const v1::JobEvent& event);

  std::string job_id_;
  ProgressOptions options_;
  int64_t last_sequence_ = 0;
  std::string open_bar_;      // kTty: the bar drawn without its newline ("" if none)
  absl::Time epoch_start_;    // when the current epoch began (see above)
  bool have_epoch_start_ = false;
  int32_t bar_epoch_ = 0;     // the epoch the open bar belongs to
  int64_t steps_ = 0;         // steps per epoch, from the latest StepProgress
  int restarts_ = 0;          // RESTARTING changes seen
};

}  // namespace cohort::client
