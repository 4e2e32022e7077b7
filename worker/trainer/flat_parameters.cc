#include "worker/trainer/flat_parameters.h"

#include "worker/trainer/cpu_kernels.h"

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

bool FlatParameters::GradFinite() const {
  if (IsCpuFloat(grad_)) return AllFinite(FloatSpan(grad_));
  return torch::isfinite(grad_).all().item<bool>();
}

bool IsCpuFloat(const torch::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous();
}

std::span<float> FloatSpan(torch::Tensor& t) {
  return {t.data_ptr<float>(), static_cast<size_t>(t.numel())};
}

std::span<const float> FloatSpan(const torch::Tensor& t) {
  return {t.data_ptr<float>(), static_cast<size_t>(t.numel())};
}

}  // namespace cohort::trainer
