#pragma once

// StepTrace: one rank's timeline of training steps, for `--trace`, as a Chrome trace
// (the JSON "traceEvents" format chrome://tracing and ui.perfetto.dev load). Each rank
// is a process (pid = rank, named "rank R") with two tracks:
//
//   tid 0 "compute"      step                      (one per step, args: epoch, step)
//                          data | forward | backward | all-reduce wait | optimizer
//   tid 1 "all-reduce"   bucket <i>                (each gradient bucket's all-reduce)
//
// Ranks sharing one copy of the model (shared_replica.h) exchange nothing in the
// background: their all-reduce track is empty, and the phase between backward and the
// optimizer is "gradient sum" (summing this rank's part, the barriers' waits included).
//
// The phases of a step lie inside it and one after another, so spans nest properly
// per track. A bucket's span runs from its start (during backward) until the training
// thread saw it complete, and never overlaps the bucket before it (buckets run in
// order). Times are microseconds since the Unix epoch, so files of ranks on hosts
// with synchronized clocks merge into one timeline (common/chrome_trace.h).
//
// At most `max_spans` spans are kept (later ones are counted, not kept: a long run
// traces its beginning). The first Write() to a path makes the file atomically (write,
// then rename); later ones to the same path append the spans added since, in place of
// the file's closing bytes, so a run that writes at every epoch's end writes each span
// once instead of the whole trace again (at epoch 16 of the mlp at 128 rows a rewrite
// took 28 ms, inside the epoch). The file is a complete trace after every Write; a
// process killed during one leaves it unterminated, every span before intact.
// Torch-free. Training thread only.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace cohort::trainer {

// When the phases of one step began and ended. The three after `start` stay
// InfinitePast on a rank that had no rows in the step.
struct StepPhases {
  absl::Time start;
  absl::Time data_end = absl::InfinitePast();
  absl::Time forward_end = absl::InfinitePast();  // forward and the loss
  absl::Time backward_end = absl::InfinitePast();
  absl::Time reduce_start = absl::InfinitePast();  // FinishStep: waiting for the all-reduce
  absl::Time reduce_end = absl::InfinitePast();
  // The reduce phase is SharedReplica's gradient sum, not a wait for all-reduces.
  bool shared_sum = false;
};

class StepTrace {
 public:
  enum class Track { kCompute = 0, kAllReduce = 1 };

  explicit StepTrace(int rank, size_t max_spans = 500000) : rank_(rank), max_spans_(max_spans) {}

  // `epoch` and `step` (1-based) are kept as arguments of spans named "step".
  void Add(Track track, std::string name, absl::Time start, absl::Time end, int epoch = 0,
           int64_t step = 0);

  // A step (1-based `epoch` and `step`) that ended at `end`: the span "step" and its
  // phases on the compute track (data, forward, backward, metrics, all-reduce wait,
  // optimizer; empty ones left out), and `buckets` on the all-reduce track.
  void AddStep(int epoch, int64_t step, const StepPhases& phases, absl::Time end,
               const std::vector<std::pair<absl::Time, absl::Time>>& buckets);

  size_t spans() const { return spans_.size(); }
  int64_t dropped() const { return dropped_; }

  // The whole trace as Chrome trace JSON.
  std::string Json() const;
  // The whole trace into `path`: the spans written to it before are not written again.
  absl::Status Write(const std::string& path);

 private:
  struct Span {
    Track track;
    std::string name;
    int64_t start_us;
    int64_t duration_us;
    int epoch;
    int64_t step;
  };
  std::string Head() const;                   // up to the first span
  std::string Tail() const;                   // after the last one
  void AppendSpan(const Span& s, std::string& out) const;  // ",{...}"

  const int rank_;
  const size_t max_spans_;
  std::vector<Span> spans_;
  int64_t dropped_ = 0;
  // What Write left in `written_path_`: the spans before `written_spans_`, whose text
  // ends at byte `written_bytes_` (where Tail() begins), in a file of `written_size_`.
  std::string written_path_;
  size_t written_spans_ = 0;
  int64_t written_bytes_ = 0;
  int64_t written_size_ = 0;
};

// The rank files `dir`/rank-*.json merged into one trace at `out_path`
// (common/chrome_trace.h): what rank 0 of a standalone run makes of the files of the
// ranks that share its output directory.
absl::Status MergeRankTraces(const std::string& dir, const std::string& out_path);

// `dir`/rank-<rank>.json
std::string RankTracePath(const std::string& dir, int rank);

}  // namespace cohort::trainer
