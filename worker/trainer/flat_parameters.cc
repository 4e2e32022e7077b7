#include "worker/trainer/flat_parameters.h"

namespace cohort::trainer {

FlatParameters::FlatParameters(const std::vector<torch::Tensor*>& variables) {
  int64_t total = 0;
  for (torch::Tensor* v : variables) {
    slots_.push_back({total, v->numel()});
    total += v->numel();
  }
  torch::Device device = variables.empty() ? torch::Device(torch::kCPU) : variables[0]->device();
  auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  data_ = torch::empty({total}, options);
  grad_ = torch::zeros({total}, options);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < variables.size(); ++i) {
    torch::Tensor& v = *variables[i];
    const Slot& s = slots_[i];
    torch::Tensor view = data_.narrow(0, s.offset, s.numel);
    view.copy_(v.detach().reshape({-1}));
    v.set_data(view.view(v.sizes()));
    v.mutable_grad() = grad_.narrow(0, s.offset, s.numel).view(v.sizes());
  }
}

}  // namespace cohort::trainer
