#pragma once

// TensorBoardLog: rank 0's training curves as TensorBoard event files, laid out as
// Keras' TensorBoard callback lays them out, so `tensorboard --logdir <out>/tensorboard`
// shows a Cohort run beside a Keras one:
//
//   <dir>/train/       epoch_loss, epoch_<metric>, epoch_learning_rate,
//                      epoch_samples_per_second          at step = epoch (0-based)
//                      batch_loss (the epoch's running mean, as Keras' batch logs),
//                      batch_learning_rate, batch_samples_per_second,
//                      batch_step_seconds, batch_data_wait_seconds,
//                      batch_all_reduce_seconds, batch_all_reduce_wait_seconds
//                                                        at step = the global step (1-based)
//   <dir>/validation/  epoch_loss, epoch_<metric>  (the val_* logs)  at step = epoch
//
// Steps are queued in memory and written once per epoch by EndEpoch, which flushes both
// files (common/tensorboard/event_file_writer.h: a crash leaves what was flushed).
// Torch-free. Training thread only.

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensorboard/event_file_writer.h"
#include "worker/trainer/step_stats.h"

namespace cohort::trainer {

class TensorBoardLog {
 public:
  // Makes `dir`/train and `dir`/validation with a new event file in each.
  static absl::StatusOr<std::unique_ptr<TensorBoardLog>> Create(const std::string& dir);

  // `global_step`: 1-based, counted across epochs (the optimizer's iterations).
  // `global_rows`: the rows of the global batch, for samples/s.
  void AddStep(int64_t global_step, double running_loss, double learning_rate,
               const StepTiming& timing, int64_t global_rows);

  // `logs`: the epoch's logs as history.json has them ("loss", "accuracy", "val_loss",
  // ...); non-numbers are skipped. Flushes both files.
  absl::Status EndEpoch(int epoch, const nlohmann::json& logs, double learning_rate,
                        double samples_per_second);

 private:
  TensorBoardLog(std::unique_ptr<tensorboard::EventFileWriter> train,
                 std::unique_ptr<tensorboard::EventFileWriter> validation)
      : train_(std::move(train)), validation_(std::move(validation)) {}

  std::unique_ptr<tensorboard::EventFileWriter> train_;
  std::unique_ptr<tensorboard::EventFileWriter> validation_;
};

}  // namespace cohort::trainer
