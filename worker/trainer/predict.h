#pragma once

// Predict: runs a Keras model (a .keras file or to_json() JSON, with its weights) on
// the rows of a NumPy array and writes the outputs as a float32 .npy, in inference mode
// (no dropout, moving statistics). `cohort-worker predict` is its command; tests use
// it to compare Cohort's predictions with Keras'. Torch-free header.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/job/job_spec.h"

namespace cohort::trainer {

struct PredictOptions {
  std::string model_path;
  job::ArrayRef x;
  std::string out_path;
  int64_t batch_size = 256;
  job::Device device = job::Device::kCpu;
};

absl::Status Predict(const PredictOptions& options);

}  // namespace cohort::trainer
