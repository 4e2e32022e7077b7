#include "tests/server/job_fixtures.h"

#include <catch2/catch.hpp>

#include <vector>

#include "common/npy/npy_writer.h"
#include "tests/common/keras/config_builder.h"

namespace cohort::server::testing {

using keras::testing::DenseEntry;
using keras::testing::InputEntry;
using keras::testing::SequentialModel;

std::string ClassifierJson(int features, int classes) {
  return SequentialModel({InputEntry("features", {features}), DenseEntry("dense", classes, "softmax")})
      .dump();
}

void WriteData(const std::string& dir, int64_t rows, int64_t features, int64_t max_label) {
  std::vector<float> x(rows * features);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) / 7.0f;
  std::vector<int64_t> y(rows);
  for (int64_t i = 0; i < rows; ++i) y[i] = i % (max_label + 1);
  y[rows - 1] = max_label;
  REQUIRE(npy::WriteNpy(dir + "/x.npy", npy::DType::kFloat32, {rows, features}, x.data()).ok());
  REQUIRE(npy::WriteNpy(dir + "/y.npy", npy::DType::kInt64, {rows}, y.data()).ok());
}

v1::JobSpec ClassifierSpec(const std::string& dir, int workers, int features) {
  v1::JobSpec spec;
  spec.set_name("digits");
  spec.set_config_json(ClassifierJson(features));
  spec.mutable_data()->mutable_x()->set_path(dir + "/x.npy");
  spec.mutable_data()->mutable_y()->set_path(dir + "/y.npy");
  spec.mutable_fit()->set_epochs(2);
  spec.mutable_fit()->set_batch_size(8 * workers);
  spec.mutable_compile()->mutable_loss()->set_kind(v1::LOSS_KIND_SPARSE_CATEGORICAL_CROSSENTROPY);
  spec.mutable_resources()->set_workers(workers);
  return spec;
}

}  // namespace cohort::server::testing
