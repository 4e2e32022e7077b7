#include "worker/trainer/flat_parameters.h"

#include "worker/trainer/cpu_kernels.h"

namespace cohort::trainer {

FlatParameters::FlatParameters(const std::vector<torch::Tensor*>& variables)
    : variables_(variables) {
  int64_t total = 0;
  for (torch::Tensor* v : variables) {
    total = LineRoundUp(total);
    slots_.push_back({total, v->numel()});
    total += v->numel();
  }
  total = LineRoundUp(total);  // buffers laid end to end (the optimizer's slots) stay aligned
  torch::Device device = variables.empty() ? torch::Device(torch::kCPU) : variables[0]->device();
  auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  // Zeros: the padding between variables stays zero (a zero gradient updates nothing).
  data_ = torch::zeros({total}, options);
  grad_ = torch::zeros({total}, options);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < variables.size(); ++i) {
    data_.narrow(0, slots_[i].offset, slots_[i].numel).copy_(variables[i]->detach().reshape({-1}));
  }
  PointVariables();
}

void FlatParameters::MoveTo(float* data, float* grad, bool copy_values) {
  torch::NoGradGuard no_grad;
  torch::Tensor moved_data = torch::from_blob(data, {numel()}, data_.options());
  torch::Tensor moved_grad = torch::from_blob(grad, {numel()}, grad_.options());
  if (copy_values) moved_data.copy_(data_);
  moved_grad.copy_(grad_);
  data_ = moved_data;
  grad_ = moved_grad;
  PointVariables();
}

void FlatParameters::PointVariables() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < variables_.size(); ++i) {
    torch::Tensor& v = *variables_[i];
    const Slot& s = slots_[i];
    v.set_data(data_.narrow(0, s.offset, s.numel).view(v.sizes()));
    v.mutable_grad() = grad_.narrow(0, s.offset, s.numel).view(v.sizes());
  }
}

int64_t FlatParameters::packed_numel() const {
  int64_t n = 0;
  for (const Slot& s : slots_) n += s.numel;
  return n;
}

torch::Tensor FlatParameters::Packed(const torch::Tensor& flat) const {
  TORCH_CHECK(flat.numel() == numel(), "Packed: ", flat.numel(), " floats, not ", numel());
  std::vector<torch::Tensor> parts;
  for (const Slot& s : slots_) parts.push_back(flat.narrow(0, s.offset, s.numel));
  return parts.empty() ? flat.new_empty({0}) : torch::cat(parts);
}

torch::Tensor FlatParameters::Unpacked(const torch::Tensor& packed) const {
  TORCH_CHECK(packed.numel() == packed_numel(), "Unpacked: ", packed.numel(), " floats, not ",
              packed_numel());
  torch::Tensor flat = torch::zeros({numel()}, data_.options());
  torch::Tensor from = packed.reshape({-1}).to(data_.options());
  int64_t at = 0;
  for (const Slot& s : slots_) {
    flat.narrow(0, s.offset, s.numel).copy_(from.narrow(0, at, s.numel));
    at += s.numel;
  }
  return flat;
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
