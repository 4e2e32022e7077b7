#include "worker/trainer/losses.h"

#include "worker/trainer/cpu_kernels.h"

namespace cohort::trainer {
namespace {

constexpr double kEpsilon = 1e-7;  // Keras' backend epsilon

using keras::Activation;
using keras::LossKind;
using keras::MetricKind;

// Integer labels shaped like the output without its class axis.
torch::Tensor SparseLabels(const torch::Tensor& y, const torch::Tensor& out) {
  torch::Tensor labels = y;
  if (labels.dim() == out.dim() && labels.size(-1) == 1) labels = labels.squeeze(-1);
  return labels.to(torch::kLong);
}

torch::Tensor LogProbabilities(const KerasModel::Output& out, bool from_logits) {
  if (from_logits) return torch::log_softmax(out.value, -1);
  if (out.logits.defined() && out.final_activation == Activation::kSoftmax) {
    return torch::log_softmax(out.logits, -1);
  }
  torch::Tensor p = out.value / out.value.sum(-1, /*keepdim=*/true);
  return torch::log(p.clamp(kEpsilon, 1.0 - kEpsilon));
}

}  // namespace

torch::Tensor ElementLosses(const keras::LossConfig& loss, const KerasModel::Output& out,
                            const torch::Tensor& y) {
  const torch::Tensor& pred = out.value;
  switch (loss.kind) {
    case LossKind::kSparseCategoricalCrossentropy: {
      torch::Tensor logp = LogProbabilities(out, loss.from_logits);
      return -logp.gather(-1, SparseLabels(y, pred).unsqueeze(-1)).squeeze(-1);
    }
    case LossKind::kCategoricalCrossentropy: {
      torch::Tensor target = y.to(pred.scalar_type());
      if (loss.label_smoothing > 0) {
        target = target * (1.0 - loss.label_smoothing) + loss.label_smoothing / pred.size(-1);
      }
      return -(target * LogProbabilities(out, loss.from_logits)).sum(-1);
    }
    case LossKind::kBinaryCrossentropy: {
      torch::Tensor target = y.to(pred.scalar_type()).reshape(pred.sizes());
      if (loss.label_smoothing > 0) {
        target = target * (1.0 - loss.label_smoothing) + 0.5 * loss.label_smoothing;
      }
      torch::Tensor per;
      if (loss.from_logits) {
        per = torch::binary_cross_entropy_with_logits(pred, target, {}, {}, at::Reduction::None);
      } else if (out.logits.defined() && out.final_activation == Activation::kSigmoid) {
        per = torch::binary_cross_entropy_with_logits(out.logits, target, {}, {},
                                                      at::Reduction::None);
      } else {
        torch::Tensor p = pred.clamp(kEpsilon, 1.0 - kEpsilon);
        per = -(target * torch::log(p) + (1 - target) * torch::log(1 - p));
      }
      return per.mean(-1);
    }
    case LossKind::kMeanSquaredError:
      return (pred - y.to(pred.scalar_type()).reshape(pred.sizes())).square().mean(-1);
    case LossKind::kMeanAbsoluteError:
      return (pred - y.to(pred.scalar_type()).reshape(pred.sizes())).abs().mean(-1);
    case LossKind::kHuber: {
      torch::Tensor err = (pred - y.to(pred.scalar_type()).reshape(pred.sizes())).abs();
      torch::Tensor quadratic = err.clamp_max(loss.delta);
      torch::Tensor linear = err - quadratic;
      return (0.5 * quadratic.square() + loss.delta * linear).mean(-1);
    }
  }
  return torch::Tensor();
}

torch::Tensor MetricValues(const keras::MetricConfig& metric, const torch::Tensor& pred,
                           const torch::Tensor& y) {
  torch::NoGradGuard no_grad;
  switch (metric.kind) {
    case MetricKind::kSparseCategoricalAccuracy:
      return (pred.argmax(-1) == SparseLabels(y, pred)).to(torch::kFloat32);
    case MetricKind::kCategoricalAccuracy:
      return (pred.argmax(-1) == y.argmax(-1)).to(torch::kFloat32);
    case MetricKind::kBinaryAccuracy: {
      torch::Tensor target = y.to(pred.scalar_type()).reshape(pred.sizes());
      return ((pred > metric.threshold).to(torch::kFloat32) == target).to(torch::kFloat32).mean(-1);
    }
    case MetricKind::kExactAccuracy:
      return (pred == y.to(pred.scalar_type()).reshape(pred.sizes())).to(torch::kFloat32);
    case MetricKind::kMeanAbsoluteError:
      return (pred - y.to(pred.scalar_type()).reshape(pred.sizes())).abs().mean(-1);
    case MetricKind::kMeanSquaredError:
      return (pred - y.to(pred.scalar_type()).reshape(pred.sizes())).square().mean(-1);
    case MetricKind::kAccuracy:
      break;  // resolved against the shapes before training (keras::ResolveMetric)
  }
  return torch::zeros({pred.size(0)}, pred.options());
}

MetricTotal MetricSum(const keras::MetricConfig& metric, const torch::Tensor& pred,
                      const torch::Tensor& y) {
  auto plain = [](const torch::Tensor& t, torch::ScalarType type) {
    return t.device().is_cpu() && t.scalar_type() == type && t.is_contiguous();
  };
  if (pred.dim() == 2 && plain(pred, torch::kFloat32)) {
    const int64_t rows = pred.size(0), columns = pred.size(1);
    if (metric.kind == MetricKind::kSparseCategoricalAccuracy && plain(y, torch::kLong) &&
        y.numel() == rows && (y.dim() == 1 || (y.dim() == 2 && y.size(1) == 1))) {
      return {static_cast<double>(ArgmaxMatches(pred.data_ptr<float>(), rows, columns,
                                                y.data_ptr<int64_t>(), nullptr)),
              rows};
    }
    if (metric.kind == MetricKind::kCategoricalAccuracy && plain(y, torch::kFloat32) &&
        y.sizes() == pred.sizes()) {
      return {static_cast<double>(ArgmaxMatches(pred.data_ptr<float>(), rows, columns, nullptr,
                                                y.data_ptr<float>())),
              rows};
    }
  }
  torch::Tensor values = MetricValues(metric, pred, y);
  return {values.sum().item<double>(), values.numel()};
}

}  // namespace cohort::trainer
