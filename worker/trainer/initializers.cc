#include "worker/trainer/initializers.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

namespace cohort::trainer {
namespace {

using Kind = keras::Initializer::Kind;

// Keras' compute_fans.
std::pair<double, double> Fans(const keras::Shape& shape) {
  if (shape.empty()) return {1.0, 1.0};
  if (shape.size() == 1) return {double(shape[0]), double(shape[0])};
  if (shape.size() == 2) return {double(shape[0]), double(shape[1])};
  double receptive = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i) receptive *= double(shape[i]);
  return {double(shape[shape.size() - 2]) * receptive, double(shape.back()) * receptive};
}

// Normal(mean, stddev) cut at two standard deviations, by inverting the CDF of a
// uniform draw between the cut points (no rejection loop).
torch::Tensor TruncatedNormal(const std::vector<int64_t>& shape, double mean, double stddev,
                              at::Generator& gen) {
  const double lo = 0.5 * (1 + std::erf(-2.0 / std::sqrt(2.0)));
  const double hi = 0.5 * (1 + std::erf(2.0 / std::sqrt(2.0)));
  torch::Tensor u = torch::empty(shape, torch::kFloat64).uniform_(lo, hi, gen);
  torch::Tensor z = torch::erfinv(u * 2 - 1) * std::sqrt(2.0);
  return (z.clamp(-2.0, 2.0) * stddev + mean).to(torch::kFloat32);
}

}  // namespace

torch::Tensor InitializeVariable(const keras::Initializer& init, const keras::Shape& shape,
                                 uint64_t seed) {
  std::vector<int64_t> dims(shape.begin(), shape.end());
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  switch (init.kind) {
    case Kind::kZeros:
      return torch::zeros(dims, f32);
    case Kind::kOnes:
      return torch::ones(dims, f32);
    case Kind::kConstant:
      return torch::full(dims, init.value, f32);
    case Kind::kRandomNormal:
      return torch::empty(dims, f32).normal_(init.mean, init.stddev, gen);
    case Kind::kRandomUniform:
      return torch::empty(dims, f32).uniform_(init.minval, init.maxval, gen);
    case Kind::kTruncatedNormal:
      return TruncatedNormal(dims, init.mean, init.stddev, gen);
    case Kind::kVarianceScaling: {
      auto [fan_in, fan_out] = Fans(shape);
      double n = init.mode == keras::Initializer::FanMode::kFanIn    ? fan_in
                 : init.mode == keras::Initializer::FanMode::kFanOut ? fan_out
                                                                     : (fan_in + fan_out) / 2;
      double scale = init.scale / std::max(1.0, n);
      switch (init.distribution) {
        case keras::Initializer::Distribution::kUniform: {
          double limit = std::sqrt(3.0 * scale);
          return torch::empty(dims, f32).uniform_(-limit, limit, gen);
        }
        case keras::Initializer::Distribution::kTruncatedNormal:
          return TruncatedNormal(dims, 0.0, std::sqrt(scale) / .87962566103423978, gen);
        case keras::Initializer::Distribution::kUntruncatedNormal:
          return torch::empty(dims, f32).normal_(0.0, std::sqrt(scale), gen);
      }
    }
  }
  return torch::zeros(dims, f32);
}

}  // namespace cohort::trainer
