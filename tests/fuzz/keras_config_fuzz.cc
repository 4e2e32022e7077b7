// libFuzzer entry point for the Keras model-config parser (common/keras/model_config.h):
// any bytes must give a model IR or an error, never a crash, a hang or a huge
// allocation. A model that parses must be consistent (topological nodes, weights with
// h5 paths, parameter counts that add up) and survive the data checks fed its own
// shapes.

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "common/keras/data_check.h"
#include "common/keras/model_config.h"

namespace {

using cohort::keras::kUnknownDim;
using cohort::keras::ModelIr;
using cohort::keras::Shape;

void CheckConsistent(const ModelIr& model) {
  if (model.nodes.size() < 2) std::abort();
  int64_t params = 0;
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    const cohort::keras::Node& node = model.nodes[i];
    if ((i == 0) != node.inputs.empty()) std::abort();
    for (int p : node.inputs) {
      if (p < 0 || static_cast<size_t>(p) >= i) std::abort();
    }
    int64_t node_params = 0;
    for (const cohort::keras::WeightSpec& w : node.weights) {
      int64_t n = 1;
      for (int64_t d : w.shape) {
        if (d < 1) std::abort();
        n *= d;
      }
      node_params += n;
      if (w.h5_path.rfind(node.weights_group + "/vars/", 0) != 0) std::abort();
    }
    if (node_params != node.param_count) std::abort();
    params += node_params;
  }
  if (params != model.param_count || model.trainable_param_count > params) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ModelIr> model = cohort::keras::ParseModelConfig(text);
  if (!model.ok()) {
    if (model.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  CheckConsistent(*model);
  // Data shaped as the model says must pass, unknown dimensions taking size 3 (which
  // may be too small for the model: then an error, not a crash).
  Shape x_shape = {2};
  for (int64_t d : model->input_config().shape) x_shape.push_back(d == kUnknownDim ? 3 : d);
  Shape y_shape = {2};
  for (int64_t d : model->output().output_shape) y_shape.push_back(d == kUnknownDim ? 3 : d);
  cohort::keras::ArraySpec x{x_shape, model->input_config().dtype};
  cohort::keras::ArraySpec y{y_shape, cohort::keras::DType::kFloat32};
  absl::Status checked =
      cohort::keras::CheckData(*model, x, y, cohort::keras::LossKind::kMeanSquaredError);
  bool known = true;
  for (int64_t d : model->input_config().shape) known &= d != kUnknownDim;
  if (known && !checked.ok()) std::abort();
  (void)cohort::keras::CheckLabelRange(*model, 0, 5);
  (void)cohort::keras::CheckTokenRange(*model, 0, 5);
  return 0;
}
