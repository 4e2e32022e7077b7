#include "worker/trainer/predict.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "common/keras/shape.h"
#include "common/npy/npy_array.h"
#include "common/npy/npy_writer.h"
#include "worker/trainer/keras_file.h"
#include "worker/trainer/keras_model.h"

namespace cohort::trainer {
namespace {

absl::Status PredictOrThrow(const PredictOptions& o) {
  absl::StatusOr<KerasModelFile> file = LoadKerasModel(o.model_path);
  if (!file.ok()) return file.status();
  if (!file->weights) {
    return absl::InvalidArgumentError(absl::StrCat(o.model_path, " holds no weights to predict with"));
  }
  torch::Device device = o.device == job::Device::kCuda ? torch::Device(torch::kCUDA, 0)
                                                        : torch::Device(torch::kCPU);
  absl::StatusOr<std::unique_ptr<KerasModel>> model = KerasModel::Create(file->ir, device, 0);
  if (!model.ok()) return model.status();
  if (absl::Status s = (*model)->LoadWeights(*file->weights); !s.ok()) return s;

  absl::StatusOr<std::unique_ptr<npy::NpyArray>> x = npy::OpenArray(o.x.path, o.x.key);
  if (!x.ok()) return x.status();
  const keras::InputLayerConfig& input = file->ir.input_config();
  std::vector<int64_t> row((*x)->shape().begin() + 1, (*x)->shape().end());
  bool fits = row.size() == input.shape.size();
  for (size_t i = 0; fits && i < row.size(); ++i) {
    fits = input.shape[i] == keras::kUnknownDim || input.shape[i] == row[i];
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat((*x)->source(), " rows have shape ",
                                                   keras::ShapeToString(row), ", the model takes ",
                                                   keras::ShapeToString(input.shape)));
  }
  bool floats = keras::IsFloatingPoint(input.dtype);
  npy::DType in_dtype = floats ? npy::DType::kFloat32 : npy::DType::kInt64;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> outputs;
  for (int64_t begin = 0; begin < (*x)->rows(); begin += o.batch_size) {
    int64_t end = std::min((*x)->rows(), begin + o.batch_size);
    std::vector<int64_t> rows(end - begin);
    for (int64_t i = begin; i < end; ++i) rows[i - begin] = i;
    std::vector<int64_t> shape{end - begin};
    shape.insert(shape.end(), row.begin(), row.end());
    torch::Tensor batch = torch::empty(shape, floats ? torch::kFloat32 : torch::kLong);
    if (absl::Status s = (*x)->GatherRows(rows, in_dtype, batch.data_ptr()); !s.ok()) return s;
    outputs.push_back((*model)->Forward(batch.to(device), /*training=*/false).value.to(torch::kCPU));
  }
  torch::Tensor all = torch::cat(outputs).contiguous();
  std::vector<int64_t> out_shape(all.sizes().begin(), all.sizes().end());
  return npy::WriteNpy(o.out_path, npy::DType::kFloat32, out_shape, all.data_ptr<float>());
}

}  // namespace

absl::Status Predict(const PredictOptions& options) {
  try {
    return PredictOrThrow(options);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("LibTorch: ", e.what_without_backtrace()));
  }
}

}  // namespace cohort::trainer
