#include "worker/trainer/tensorboard_log.h"

#include <vector>

#include "absl/strings/match.h"

namespace cohort::trainer {

using tensorboard::EventFileWriter;
using tensorboard::Scalar;

absl::StatusOr<std::unique_ptr<TensorBoardLog>> TensorBoardLog::Create(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<EventFileWriter>> train = EventFileWriter::Create(dir + "/train");
  if (!train.ok()) return train.status();
  absl::StatusOr<std::unique_ptr<EventFileWriter>> validation =
      EventFileWriter::Create(dir + "/validation");
  if (!validation.ok()) return validation.status();
  return std::unique_ptr<TensorBoardLog>(
      new TensorBoardLog(std::move(*train), std::move(*validation)));
}

void TensorBoardLog::AddStep(int64_t global_step, double running_loss, double learning_rate,
                             const StepTiming& t, int64_t global_rows) {
  double step_seconds = absl::ToDoubleSeconds(t.step);
  auto f = [](double v) { return static_cast<float>(v); };
  train_->AddScalars(
      global_step,
      {{"batch_loss", f(running_loss)},
       {"batch_learning_rate", f(learning_rate)},
       {"batch_samples_per_second", f(step_seconds > 0 ? global_rows / step_seconds : 0.0)},
       {"batch_step_seconds", f(step_seconds)},
       {"batch_data_wait_seconds", f(absl::ToDoubleSeconds(t.data))},
       {"batch_all_reduce_seconds", f(absl::ToDoubleSeconds(t.all_reduce))},
       {"batch_all_reduce_wait_seconds", f(absl::ToDoubleSeconds(t.all_reduce_wait))}});
}

absl::Status TensorBoardLog::EndEpoch(int epoch, const nlohmann::json& logs, double learning_rate,
                                      double samples_per_second) {
  std::vector<Scalar> train, validation;
  for (const auto& [name, value] : logs.items()) {
    if (!value.is_number()) continue;
    float v = value.get<float>();
    if (absl::StartsWith(name, "val_")) {
      validation.push_back({"epoch_" + name.substr(4), v});
    } else {
      train.push_back({"epoch_" + name, v});
    }
  }
  train.push_back({"epoch_learning_rate", static_cast<float>(learning_rate)});
  train.push_back({"epoch_samples_per_second", static_cast<float>(samples_per_second)});
  train_->AddScalars(epoch, train);
  validation_->AddScalars(epoch, validation);
  absl::Status s = train_->Flush();
  absl::Status v = validation_->Flush();
  return s.ok() ? v : s;
}

}  // namespace cohort::trainer
