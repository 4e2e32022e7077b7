#pragma once

// Small jobs for the job server's tests: a Dense classifier's config and NumPy data
// written into a test's directory.

#include <cstdint>
#include <string>

#include "cohort/v1/types.pb.h"

namespace cohort::server::testing {

// A Sequential model: InputLayer (features) -> Dense 'dense' (classes, softmax).
std::string ClassifierJson(int features = 64, int classes = 10);

// dir/x.npy (rows x features, float32) and dir/y.npy (rows labels, int64, the largest
// being max_label).
void WriteData(const std::string& dir, int64_t rows, int64_t features, int64_t max_label);

// A job on that model and data (inline config_json, sparse categorical crossentropy).
v1::JobSpec ClassifierSpec(const std::string& dir, int workers = 1, int features = 64);

}  // namespace cohort::server::testing
