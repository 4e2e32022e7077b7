#include "worker/trainer/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "worker/trainer/cpu_kernels.h"

namespace cohort::trainer {
namespace {

using keras::OptimizerKind;

int SlotCount(const keras::OptimizerConfig& c) {
  switch (c.kind) {
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW:
      return c.amsgrad ? 3 : 2;
    case OptimizerKind::kSgd:
      return c.momentum != 0.0 ? 1 : 0;
    case OptimizerKind::kRmsprop:
      return 1 + (c.momentum > 0 ? 1 : 0) + (c.centered ? 1 : 0);
    case OptimizerKind::kAdagrad:
      return 1;
  }
  return 0;
}

}  // namespace

Optimizer::Optimizer(keras::OptimizerConfig config, const FlatParameters& params)
    : config_(std::move(config)) {
  const torch::Tensor& data = const_cast<FlatParameters&>(params).data();
  for (int i = 0; i < SlotCount(config_); ++i) {
    bool accumulator = config_.kind == OptimizerKind::kAdagrad;
    slots_.push_back(accumulator ? torch::full_like(data, config_.initial_accumulator_value)
                                 : torch::zeros_like(data));
  }
}

void Optimizer::ClipGradients(FlatParameters& params, torch::Tensor& g) {
  if (config_.clipvalue) g.clamp_(-*config_.clipvalue, *config_.clipvalue);
  if (config_.clipnorm) {
    for (const auto& s : params.slots()) {
      torch::Tensor v = g.narrow(0, s.offset, s.numel);
      double norm = v.norm().item<double>();
      if (norm > *config_.clipnorm) v.mul_(*config_.clipnorm / norm);
    }
  }
  if (config_.global_clipnorm) {
    double norm = g.norm().item<double>();
    if (norm > *config_.global_clipnorm) g.mul_(*config_.global_clipnorm / norm);
  }
}

void Optimizer::Step(FlatParameters& params) { Step(params, Part()); }

void Optimizer::Step(FlatParameters& params, Part part) {
  torch::NoGradGuard no_grad;
  const int64_t begin = part.begin;
  const int64_t end = part.end < 0 ? params.numel() : part.end;
  TORCH_CHECK(UpdatesByRange() || (begin == 0 && end == params.numel()),
              "clipping by norm updates every parameter at once");
  auto range = [&](torch::Tensor& t) { return t.narrow(0, begin, end - begin); };
  torch::Tensor var = range(params.data());
  torch::Tensor g = range(params.grad());
  ClipGradients(params, g);
  const double lr = learning_rate();
  if (config_.weight_decay > 0) var.mul_(1.0 - config_.weight_decay * lr);
  const double t = static_cast<double>(iterations_ + 1);
  switch (config_.kind) {
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW: {
      torch::Tensor m = range(slots_[0]);
      torch::Tensor v = range(slots_[1]);
      // Keras computes the bias corrections in the variable's dtype (adam.py casts
      // beta_1, beta_2 and iterations + 1 to float32 before ops.power), and 1 - beta_2^t
      // loses digits to cancellation: at t = 1 float32 gives an alpha 6e-6 smaller than
      // exact arithmetic would. Keras' steps carry that error, so ours do too.
      const float tf = static_cast<float>(t);
      const float b1_power = std::pow(static_cast<float>(config_.beta_1), tf);
      const float b2_power = std::pow(static_cast<float>(config_.beta_2), tf);
      const double alpha =
          static_cast<float>(lr) * std::sqrt(1.0f - b2_power) / (1.0f - b1_power);
      if (!config_.amsgrad && IsCpuFloat(var) && IsCpuFloat(g)) {  // one pass, no temporaries
        AdamUpdate(FloatSpan(var), FloatSpan(g), FloatSpan(m), FloatSpan(v),
                   {.one_minus_beta_1 = 1.0f - static_cast<float>(config_.beta_1),
                    .one_minus_beta_2 = 1.0f - static_cast<float>(config_.beta_2),
                    .alpha = static_cast<float>(alpha),
                    .epsilon = static_cast<float>(config_.epsilon)},
                   part.shared);
        break;
      }
      m.lerp_(g, 1 - config_.beta_1);
      v.mul_(config_.beta_2).addcmul_(g, g, 1 - config_.beta_2);
      torch::Tensor denom_src = v;
      if (config_.amsgrad) {
        denom_src = range(slots_[2]);
        torch::max_out(denom_src, denom_src, v);
      }
      var.addcdiv_(m, denom_src.sqrt().add_(config_.epsilon), -alpha);
      break;
    }
    case OptimizerKind::kSgd: {
      if (config_.momentum == 0.0) {
        var.add_(g, -lr);
        break;
      }
      torch::Tensor m = range(slots_[0]);
      m.mul_(config_.momentum).add_(g, -lr);
      if (config_.nesterov) {
        var.add_(m, config_.momentum).add_(g, -lr);
      } else {
        var.add_(m);
      }
      break;
    }
    case OptimizerKind::kRmsprop: {
      torch::Tensor velocity = range(slots_[0]);
      velocity.mul_(config_.rho).addcmul_(g, g, 1 - config_.rho);
      torch::Tensor denominator;
      if (config_.centered) {
        torch::Tensor average = range(slots_.back());
        average.mul_(config_.rho).add_(g, 1 - config_.rho);
        denominator = velocity - average.square() + config_.epsilon;
      } else {
        denominator = velocity + config_.epsilon;
      }
      torch::Tensor increment = g * denominator.rsqrt_() * lr;
      if (config_.momentum > 0) {
        torch::Tensor momentum = range(slots_[1]);
        momentum.mul_(config_.momentum).add_(increment);
        var.sub_(momentum);
      } else {
        var.sub_(increment);
      }
      break;
    }
    case OptimizerKind::kAdagrad: {
      torch::Tensor accumulator = range(slots_[0]);
      accumulator.addcmul_(g, g);
      var.addcdiv_(g, (accumulator + config_.epsilon).sqrt_(), -lr);
      break;
    }
  }
  ++iterations_;
}

std::vector<torch::Tensor> Optimizer::State() const { return slots_; }

void Optimizer::MoveStateTo(float* memory, bool copy_values) {
  torch::NoGradGuard no_grad;
  for (torch::Tensor& slot : slots_) {
    torch::Tensor moved = torch::from_blob(memory, slot.sizes(), slot.options());
    if (copy_values) moved.copy_(slot);
    slot = moved;
    memory += slot.numel();
  }
}

absl::Status Optimizer::Restore(int64_t iterations, const std::vector<torch::Tensor>& state) {
  if (state.size() != slots_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint has ", state.size(),
                                                   " optimizer slots, the optimizer has ",
                                                   slots_.size()));
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < state.size(); ++i) {
    if (state[i].numel() != slots_[i].numel()) {
      return absl::InvalidArgumentError("checkpoint optimizer state does not match the model");
    }
    slots_[i].copy_(state[i].reshape(slots_[i].sizes()));
  }
  iterations_ = iterations;
  return absl::OkStatus();
}

}  // namespace cohort::trainer
