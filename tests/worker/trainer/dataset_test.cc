// Dataset's gathers: rows copied by the rank's OpenMP threads (`threaded`) are the rows
// one thread copies, converted from the file's dtype, and a bad row index is reported
// as the first one in the batch, however the batch was split.

#include "worker/trainer/dataset.h"

#include <omp.h>

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/npy/npy_writer.h"
#include "tests/support/temp_dir.h"
#include "worker/trainer/keras_file.h"

namespace cohort::trainer {
namespace {

using cohort::testing::TempDir;

constexpr int64_t kRows = 600;
constexpr int64_t kColumns = 784;  // mnist_mlp.keras takes 784 values a row

struct Fixture {
  TempDir dir;
  std::unique_ptr<Dataset> data;

  Fixture() {
    // float64 in the file: every gather converts to the model's float32.
    std::vector<double> x(kRows * kColumns);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 1000) / 7.0;
    std::vector<int64_t> y(kRows);
    for (int64_t r = 0; r < kRows; ++r) y[r] = r % 10;
    REQUIRE(npy::WriteNpy(dir.File("x.npy"), npy::DType::kFloat64, {kRows, kColumns}, x.data())
                .ok());
    REQUIRE(npy::WriteNpy(dir.File("y.npy"), npy::DType::kInt64, {kRows}, y.data()).ok());
    absl::StatusOr<KerasModelFile> file =
        LoadKerasModel(std::string(COHORT_SOURCE_DIR) + "/examples/mnist_mlp.keras");
    REQUIRE(file.ok());
    job::DataSpec spec;
    spec.x.path = dir.File("x.npy");
    spec.y.path = dir.File("y.npy");
    absl::StatusOr<std::unique_ptr<Dataset>> opened = Dataset::Open(
        spec, file->ir, keras::KerasDefaultLoss(keras::LossKind::kSparseCategoricalCrossentropy));
    INFO(opened.status().ToString());
    REQUIRE(opened.ok());
    data = std::move(*opened);
  }
};

TEST_CASE("a threaded gather copies the rows one thread copies", "[dataset]") {
  Fixture f;
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < 517; ++i) rows.push_back((i * 389) % kRows);  // scattered
  torch::Tensor x1, y1;
  REQUIRE(f.data->GatherTrain(rows, torch::kCPU, /*check=*/true, /*threaded=*/false, &x1, &y1)
              .ok());
  REQUIRE(x1.sizes() == std::vector<int64_t>{517, kColumns});
  CHECK(x1[5][3].item<float>() == static_cast<float>(((rows[5] * kColumns + 3) % 1000) / 7.0));
  for (int threads : {2, 3}) {
    CAPTURE(threads);
    omp_set_num_threads(threads);
    torch::Tensor x, y;
    absl::Status s = f.data->GatherTrain(rows, torch::kCPU, true, /*threaded=*/true, &x, &y);
    omp_set_num_threads(1);
    REQUIRE(s.ok());
    CHECK(torch::equal(x, x1));
    CHECK(torch::equal(y, y1));
  }
}

TEST_CASE("a threaded gather names the batch's first bad row", "[dataset]") {
  Fixture f;
  std::vector<int64_t> rows(400);
  for (int64_t i = 0; i < 400; ++i) rows[i] = i;
  rows[390] = 7000;  // in the last thread's share
  rows[150] = 5000;  // in an earlier one: this is the error
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    omp_set_num_threads(threads);
    torch::Tensor x, y;
    absl::Status s = f.data->GatherTrain(rows, torch::kCPU, true, /*threaded=*/true, &x, &y);
    omp_set_num_threads(1);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains("row index 5000 is outside [0, 600)"));
  }
}

}  // namespace
}  // namespace cohort::trainer
