#include "worker/trainer/optimizer_weights.h"

#include <vector>

namespace cohort::trainer {
namespace {

KerasVariable Scalar(float value) {
  KerasVariable v;
  v.values = {value};
  return v;
}

KerasVariable FromTensor(const torch::Tensor& keras_layout) {
  KerasVariable v;
  v.shape = keras_layout.sizes().vec();
  torch::Tensor t = keras_layout.to(torch::kFloat32).contiguous();
  v.values.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  return v;
}

}  // namespace

bool SameOptimizerVariables(const keras::OptimizerConfig& a, const keras::OptimizerConfig& b) {
  auto constant = [](const keras::OptimizerConfig& c) {
    return c.learning_rate.kind == keras::LearningRate::Kind::kConstant;
  };
  return a.kind == b.kind && a.amsgrad == b.amsgrad && (a.momentum > 0) == (b.momentum > 0) &&
         a.centered == b.centered && constant(a) == constant(b);
}

KerasVarGroup OptimizerVarGroup(const KerasModel& model, const FlatParameters& flat,
                                const Optimizer& optimizer) {
  const keras::OptimizerConfig& config = optimizer.config();
  KerasVarGroup group;
  group.path = "optimizer/vars";
  group.name = KerasSnakeCase(keras::OptimizerKindName(config.kind));

  KerasVariable iteration;
  iteration.dtype = KerasDType::kInt32;
  iteration.int_values = {optimizer.iterations()};
  group.variables.push_back(std::move(iteration));
  if (config.learning_rate.kind == keras::LearningRate::Kind::kConstant) {
    group.variables.push_back(Scalar(static_cast<float>(config.learning_rate.initial)));
  }

  // Slot `s` of each trainable variable, in Keras' layout: the variable's own view
  // into the flat buffer tells where its slice of every slot is.
  const torch::Tensor& data = const_cast<FlatParameters&>(flat).data();
  const std::vector<torch::Tensor> slots = optimizer.State();
  auto slot_of = [&](const ModelVariable& v, size_t s) {
    int64_t offset = v.value.data_ptr<float>() - data.data_ptr<float>();
    ModelVariable view = v;
    view.value = slots[s].narrow(0, offset, v.value.numel()).view(v.value.sizes());
    return FromTensor(model.KerasLayout(view));
  };
  std::vector<const ModelVariable*> trainable;
  for (const ModelVariable& v : model.variables()) {
    if (v.trainable) trainable.push_back(&v);
  }
  const bool adam = config.kind == keras::OptimizerKind::kAdam ||
                    config.kind == keras::OptimizerKind::kAdamW;
  const size_t interleaved = std::min<size_t>(adam ? 2 : 1, slots.size());
  for (const ModelVariable* v : trainable) {
    for (size_t s = 0; s < interleaved; ++s) group.variables.push_back(slot_of(*v, s));
  }
  for (size_t s = interleaved; s < slots.size(); ++s) {
    for (const ModelVariable* v : trainable) group.variables.push_back(slot_of(*v, s));
  }
  return group;
}

}  // namespace cohort::trainer
