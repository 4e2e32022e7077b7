#include "worker/trainer/flat_parameters.h"

#include <atomic>
#include <cstdint>

#include <ATen/Parallel.h>

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
  if (!grad_.is_cpu()) return torch::isfinite(grad_).all().item<bool>();
  const uint32_t* g = reinterpret_cast<const uint32_t*>(grad_.data_ptr<float>());
  std::atomic<bool> finite{true};
  at::parallel_for(0, grad_.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    // A float is NaN or infinite when its exponent bits are all ones; an integer OR
    // reduction of that test vectorizes (a float sum would not).
    uint32_t bad = 0;
    for (int64_t i = begin; i < end; ++i) bad |= (g[i] & 0x7f800000u) == 0x7f800000u;
    if (bad) finite = false;
  });
  return finite;
}

}  // namespace cohort::trainer
