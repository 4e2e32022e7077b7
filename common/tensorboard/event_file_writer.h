#pragma once

// EventFileWriter: one TensorBoard event file, as TensorFlow's summary writers make
// them, for TensorBoard (`tensorboard --logdir`) to show as scalar curves.
//
// Create() makes the directory (and its parents) and a new file in it named
// `events.out.tfevents.<unix seconds>.<host>.<pid>.<n>` (n counts the files this
// process made), and writes the file_version event at once, so the file is valid from
// the start. Scalars are queued in memory by AddScalars and appended to the file by
// Flush (the trainer flushes once per epoch) in whole TFRecord records, then synced:
// a process that crashes leaves a file that TensorBoard reads up to the last flush, or
// up to the last complete record of a flush that was cut short.
//
// After a write error the writer is broken: every later Flush returns that error, so a
// torn record is never followed by more records. The destructor flushes and drops any
// error. Thread-compatible: one thread at a time.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "common/tensorboard/event_proto.h"

namespace cohort::tensorboard {

class EventFileWriter {
 public:
  // `clock` stamps every event's wall_time and names the file; not owned, must outlive
  // the writer. Errors: FAILED_PRECONDITION naming the path when the directory or file
  // cannot be made or written.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(const std::string& dir,
                                                                  const Clock& clock = SystemClock());
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // Queues one event holding `scalars` at `step`, stamped with the clock's time now.
  void AddScalars(int64_t step, const std::vector<Scalar>& scalars);
  void AddScalar(int64_t step, absl::string_view tag, float value) {
    AddScalars(step, {{std::string(tag), value}});
  }

  // Appends what was queued to the file and syncs it.
  absl::Status Flush();

  const std::string& path() const { return path_; }

 private:
  EventFileWriter(std::string path, int fd, const Clock& clock);

  const std::string path_;
  const int fd_;
  const Clock& clock_;
  std::string pending_;  // framed records not yet written
  absl::Status broken_;
};

}  // namespace cohort::tensorboard
