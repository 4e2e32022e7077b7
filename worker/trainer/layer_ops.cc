#include "worker/trainer/layer_ops.h"

#include <array>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>

#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>

#include "worker/trainer/cpu_kernels.h"
#include "worker/trainer/gemm.h"

namespace cohort::trainer {
namespace {

using keras::Activation;
using keras::Padding;

// Padding for one spatial axis: TF/Keras "same" puts the odd extra element after;
// Conv1D "causal" pads dilation * (k - 1) before.
std::pair<int64_t, int64_t> AxisPadding(Padding padding, int64_t in, int64_t k, int64_t stride,
                                        int64_t dilation) {
  int64_t effective = (k - 1) * dilation + 1;
  switch (padding) {
    case Padding::kValid:
      return {0, 0};
    case Padding::kCausal:
      return {effective - 1, 0};
    case Padding::kSame: {
      int64_t out = (in + stride - 1) / stride;
      int64_t total = std::max<int64_t>((out - 1) * stride + effective - in, 0);
      return {total / 2, total - total / 2};
    }
  }
  return {0, 0};
}

// Pads the spatial axes of an NC... tensor (channels first, as LibTorch's ops take
// them) when the padding is asymmetric, and returns the symmetric rest for the op.
template <int N>
torch::Tensor PadSpatial(const torch::Tensor& x_cf, Padding padding, const std::array<int64_t, N>& k,
                         const std::array<int64_t, N>& stride, const std::array<int64_t, N>& dilation,
                         double value, std::vector<int64_t>* symmetric) {
  std::vector<int64_t> pads;  // constant_pad_nd wants the last axis first
  bool asymmetric = false;
  std::vector<std::pair<int64_t, int64_t>> per_axis;
  for (int a = 0; a < N; ++a) {
    per_axis.push_back(AxisPadding(padding, x_cf.size(2 + a), k[a], stride[a], dilation[a]));
    asymmetric = asymmetric || per_axis.back().first != per_axis.back().second;
  }
  symmetric->assign(N, 0);
  if (!asymmetric) {
    for (int a = 0; a < N; ++a) (*symmetric)[a] = per_axis[a].first;
    return x_cf;
  }
  for (int a = N - 1; a >= 0; --a) {
    pads.push_back(per_axis[a].first);
    pads.push_back(per_axis[a].second);
  }
  return torch::constant_pad_nd(x_cf, pads, value);
}

// LibTorch 1.13's custom autograd Functions take no undefined tensor (VariableInfo
// asks it for a device): an absent bias goes in as an empty one, which they read as none.
torch::Tensor BiasArgument(const torch::Tensor& bias, const torch::Tensor& like) {
  return bias.defined() ? bias : torch::empty({0}, like.options());
}

// x (N, in) @ kernel (in, units) + bias, float32 on the CPU, through gemm.h's Sgemm:
// oneDNN's sgemm, which DenseGraph's models run on, where LibTorch's own products go to
// OpenBLAS, which ran the cnn's head (1,600 -> 10) on one thread whatever it was given.
// That head's three products, by --profile-epoch: 1,024 rows on 2 threads 4.1 -> 1.9 ms
// a step; 64 and 128 rows on one thread the forward halves and the backward stays
// (the input's gradient, 0.4-0.8 MB written to memory not in cache, takes most of it
// either way; with the output in cache the same product took a fifth to a tenth as
// long in a microbenchmark).
class DenseProduct : public torch::autograd::Function<DenseProduct> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& kernel, const torch::Tensor& bias) {
    RECORD_FUNCTION("cohort::Dense", std::vector<c10::IValue>({x}));
    torch::Tensor in = x.contiguous(), k = kernel.contiguous();
    const int64_t rows = in.size(0), inputs = in.size(1), units = k.size(1);
    torch::Tensor out = torch::empty({rows, units}, x.options());
    Sgemm(false, false, rows, units, inputs, in.data_ptr<float>(), inputs, k.data_ptr<float>(),
          units, 0.0f, out.data_ptr<float>(), units);
    const bool has_bias = bias.numel() > 0;  // BiasArgument
    if (has_bias) {
      AddBiasRelu(out.data_ptr<float>(), bias.contiguous().data_ptr<float>(), rows, units,
                  /*relu=*/false);
    }
    ctx->save_for_backward({in, k});
    ctx->saved_data["bias"] = has_bias;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    RECORD_FUNCTION("cohort::DenseBackward", std::vector<c10::IValue>());
    torch::autograd::variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& in = saved[0];
    const torch::Tensor& k = saved[1];
    torch::Tensor g = grads[0].contiguous();
    const int64_t rows = in.size(0), inputs = in.size(1), units = k.size(1);
    torch::Tensor input_grad, kernel_grad, bias_grad;
    if (ctx->needs_input_grad(0)) {  // g kernel^T
      input_grad = torch::empty({rows, inputs}, g.options());
      Sgemm(false, true, rows, inputs, units, g.data_ptr<float>(), units, k.data_ptr<float>(),
            units, 0.0f, input_grad.data_ptr<float>(), inputs);
    }
    if (ctx->needs_input_grad(1)) {  // x^T g
      kernel_grad = torch::empty({inputs, units}, g.options());
      Sgemm(true, false, inputs, units, rows, in.data_ptr<float>(), inputs, g.data_ptr<float>(),
            units, 0.0f, kernel_grad.data_ptr<float>(), units);
    }
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) {
      // g's column sums, as DenseGraph sums its bias' gradient (no rectifier: g unchanged).
      bias_grad = torch::empty({units}, g.options());
      ReluBackwardColumnSums(g.data_ptr<float>(), nullptr, rows, units,
                             bias_grad.data_ptr<float>());
    }
    return {input_grad, kernel_grad, bias_grad};
  }
};

}  // namespace

torch::Tensor Dense(const torch::Tensor& x, const torch::Tensor& kernel, const torch::Tensor& bias) {
  auto f32 = [](const torch::Tensor& t) { return t.scalar_type() == torch::kFloat; };
  const bool products = x.is_cpu() && kernel.is_cpu() && f32(x) && f32(kernel) &&
                        (!bias.defined() || (bias.is_cpu() && f32(bias))) && x.dim() >= 2 &&
                        kernel.dim() == 2 && x.numel() > 0 && kernel.numel() > 0 &&
                        SgemmLibrary() != GemmLibrary::kNone && !at::autocast::is_cpu_enabled();
  if (!products) {
    if (x.dim() == 2 && bias.defined()) return torch::addmm(bias, x, kernel);
    torch::Tensor y = torch::matmul(x, kernel);
    return bias.defined() ? y + bias : y;
  }
  if (x.dim() == 2) return DenseProduct::apply(x, kernel, BiasArgument(bias, x));
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = kernel.size(1);
  return DenseProduct::apply(x.reshape({-1, x.size(-1)}), kernel, BiasArgument(bias, x))
      .view(shape);
}

torch::Tensor ApplyActivation(const torch::Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::kLinear: return x;
    case Activation::kRelu: return torch::relu(x);
    case Activation::kSigmoid: return torch::sigmoid(x);
    case Activation::kTanh: return torch::tanh(x);
    case Activation::kSoftmax: return torch::softmax(x, -1);
    case Activation::kGelu: return torch::gelu(x);
    case Activation::kSilu: return torch::silu(x);
    case Activation::kElu: return torch::elu(x);
    case Activation::kSelu: return torch::selu(x);
    case Activation::kSoftplus: return torch::softplus(x);
    case Activation::kLeakyRelu: return torch::leaky_relu(x, 0.2);
  }
  return x;
}

torch::Tensor Conv1D(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const keras::Conv1DConfig& c) {
  torch::Tensor cf = x.permute({0, 2, 1});
  std::vector<int64_t> pad;
  cf = PadSpatial<1>(cf, c.padding, c.kernel_size, c.strides, c.dilation_rate, 0.0, &pad);
  torch::Tensor y = torch::conv1d(cf, weight, bias, {c.strides[0]}, pad, {c.dilation_rate[0]}, c.groups);
  return y.permute({0, 2, 1});
}

namespace {

// A kernel's shape (a struct of int64_t fields) kept in an autograd context under
// `key`, for the backward.
template <typename Shape>
void SaveShape(torch::autograd::AutogradContext* ctx, const std::string& key, const Shape& s) {
  static_assert(std::is_trivially_copyable_v<Shape> && sizeof(Shape) % sizeof(int64_t) == 0);
  std::vector<int64_t> fields(sizeof(Shape) / sizeof(int64_t));
  std::memcpy(fields.data(), &s, sizeof(Shape));
  ctx->saved_data[key] = fields;
}

template <typename Shape>
Shape SavedShape(torch::autograd::AutogradContext* ctx, const std::string& key) {
  std::vector<int64_t> fields = ctx->saved_data[key].toIntVector();
  Shape s;
  std::memcpy(static_cast<void*>(&s), fields.data(), sizeof(Shape));  // every field an int64_t
  return s;
}

// The shape of a MaxPooling2D of (N, H, W, C) `sizes`, when cpu_kernels' loops take it.
std::optional<MaxPool2DShape> LoopPoolShape(at::IntArrayRef sizes, const keras::MaxPooling2DConfig& c) {
  auto [top, bottom] = AxisPadding(c.padding, sizes[1], c.pool_size[0], c.strides[0], 1);
  auto [left, right] = AxisPadding(c.padding, sizes[2], c.pool_size[1], c.strides[1], 1);
  MaxPool2DShape s{.batch = sizes[0], .height = sizes[1], .width = sizes[2], .channels = sizes[3],
                   .pool_h = c.pool_size[0], .pool_w = c.pool_size[1], .stride_h = c.strides[0],
                   .stride_w = c.strides[1], .pad_top = top, .pad_left = left};
  if (s.height + top + bottom < s.pool_h || s.width + left + right < s.pool_w) return std::nullopt;
  s.out_height = (s.height + top + bottom - s.pool_h) / s.stride_h + 1;
  s.out_width = (s.width + left + right - s.pool_w) / s.stride_w + 1;
  if (!MaxPool2DSupported(s)) return std::nullopt;
  return s;
}

// A Conv2D that cpu_kernels' loops for few input channels take: their shape, on the
// input padded first (the zeros of the padding are an image's few channels, and every
// tap then falls inside), and that padding. Worked out from the sizes alone, so a
// Conv2D the loops do not take costs nothing here.
struct SmallConvPlan {
  Conv2DShape shape;
  int64_t top = 0, bottom = 0, left = 0, right = 0;
};

std::optional<SmallConvPlan> PlanSmallConv(const torch::Tensor& x, const torch::Tensor& weight,
                                           const keras::Conv2DConfig& c) {
  if (x.requires_grad() || !x.device().is_cpu() || x.scalar_type() != torch::kFloat ||
      weight.scalar_type() != torch::kFloat || c.groups != 1 || at::autocast::is_cpu_enabled()) {
    return std::nullopt;
  }
  SmallConvPlan plan;
  std::tie(plan.top, plan.bottom) =
      AxisPadding(c.padding, x.size(1), c.kernel_size[0], c.strides[0], c.dilation_rate[0]);
  std::tie(plan.left, plan.right) =
      AxisPadding(c.padding, x.size(2), c.kernel_size[1], c.strides[1], c.dilation_rate[1]);
  Conv2DShape& s = plan.shape;
  s = {.batch = x.size(0), .height = x.size(1) + plan.top + plan.bottom,
       .width = x.size(2) + plan.left + plan.right, .in_channels = x.size(3),
       .out_channels = weight.size(0), .kernel_h = c.kernel_size[0], .kernel_w = c.kernel_size[1],
       .stride_h = c.strides[0], .stride_w = c.strides[1], .dilation_h = c.dilation_rate[0],
       .dilation_w = c.dilation_rate[1]};
  int64_t span_h = (s.kernel_h - 1) * s.dilation_h + 1, span_w = (s.kernel_w - 1) * s.dilation_w + 1;
  if (s.height < span_h || s.width < span_w) return std::nullopt;
  s.out_height = (s.height - span_h) / s.stride_h + 1;
  s.out_width = (s.width - span_w) / s.stride_w + 1;
  if (!SmallConv2DSupported(s)) return std::nullopt;
  return plan;
}

// The loops' input: x (N, H, W, C) padded as `plan` says, contiguous.
torch::Tensor PaddedInput(const torch::Tensor& x, const SmallConvPlan& plan) {
  if (plan.top == 0 && plan.bottom == 0 && plan.left == 0 && plan.right == 0) return x.contiguous();
  // constant_pad_nd takes the last axis first: channels (none), width, height.
  return torch::constant_pad_nd(x, {0, 0, plan.left, plan.right, plan.top, plan.bottom}, 0.0)
      .contiguous();
}

// A Conv2D of few input channels on an input that needs no gradient (the model's
// input) through cpu_kernels' loops, alone (pool.batch 0: SmallConv2DForward,
// SmallConv2DParameterGradients) or with the MaxPooling2D that reads it (with `relu`,
// of its rectified output: SmallConv2DMaxPoolForward and its gradients).
class SmallConv2DLoops : public torch::autograd::Function<SmallConv2DLoops> {
 public:
  // x: (N, H, W, C) contiguous; weight: LibTorch's (out, in, kh, kw).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               const Conv2DShape& s, const MaxPool2DShape& pool, bool relu) {
    RECORD_FUNCTION(pool.batch == 0 ? "cohort::SmallConv2D" : "cohort::SmallConv2DMaxPool2D",
                    std::vector<c10::IValue>({x}));
    torch::Tensor kernel = weight.permute({2, 3, 1, 0}).contiguous();  // Keras' layout
    const bool has_bias = bias.numel() > 0;  // BiasArgument
    torch::Tensor b = has_bias ? bias.contiguous() : torch::Tensor();
    const float* bias_data = b.defined() ? b.data_ptr<float>() : nullptr;
    torch::Tensor out;
    if (pool.batch == 0) {
      out = torch::empty({s.batch, s.out_height, s.out_width, s.out_channels}, x.options());
      SmallConv2DForward(x.data_ptr<float>(), kernel.data_ptr<float>(), bias_data, s,
                         out.data_ptr<float>());
    } else {
      out = torch::empty({pool.batch, pool.out_height, pool.out_width, pool.channels}, x.options());
      torch::Tensor which = torch::empty(out.sizes(), x.options().dtype(torch::kUInt8));
      SmallConv2DMaxPoolForward(x.data_ptr<float>(), kernel.data_ptr<float>(), bias_data, s, pool,
                                relu, out.data_ptr<float>(), which.data_ptr<uint8_t>());
      ctx->saved_data["which"] = which;
    }
    ctx->saved_data["x"] = x;
    SaveShape(ctx, "conv", s);
    SaveShape(ctx, "pool", pool);
    ctx->saved_data["bias"] = has_bias;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    Conv2DShape s = SavedShape<Conv2DShape>(ctx, "conv");
    MaxPool2DShape pool = SavedShape<MaxPool2DShape>(ctx, "pool");
    torch::Tensor x = ctx->saved_data["x"].toTensor();
    torch::Tensor grad_out = grads[0].contiguous();
    torch::Tensor kernel_grad =
        torch::empty({s.kernel_h, s.kernel_w, s.in_channels, s.out_channels}, grad_out.options());
    torch::Tensor bias_grad;
    if (ctx->saved_data["bias"].toBool()) bias_grad = torch::empty({s.out_channels}, grad_out.options());
    float* bias_data = bias_grad.defined() ? bias_grad.data_ptr<float>() : nullptr;
    if (pool.batch == 0) {
      SmallConv2DParameterGradients(x.data_ptr<float>(), grad_out.data_ptr<float>(), s,
                                    kernel_grad.data_ptr<float>(), bias_data);
    } else {
      SmallConv2DMaxPoolParameterGradients(
          x.data_ptr<float>(), grad_out.data_ptr<float>(),
          ctx->saved_data["which"].toTensor().data_ptr<uint8_t>(), s, pool,
          kernel_grad.data_ptr<float>(), bias_data);
    }
    return {torch::Tensor(), kernel_grad.permute({3, 2, 0, 1}).contiguous(), bias_grad,
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor Conv2D(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const keras::Conv2DConfig& c) {
  if (std::optional<SmallConvPlan> plan = PlanSmallConv(x, weight, c)) {
    return SmallConv2DLoops::apply(PaddedInput(x, *plan), weight, BiasArgument(bias, x),
                                   plan->shape, MaxPool2DShape{}, false);
  }
  // A permuted view: NCHW indexing over channels_last memory, no copy.
  torch::Tensor cf = x.permute({0, 3, 1, 2});
  std::vector<int64_t> pad;
  cf = PadSpatial<2>(cf, c.padding, c.kernel_size, c.strides, c.dilation_rate, 0.0, &pad);
  torch::Tensor y = torch::conv2d(cf, weight, bias, {c.strides[0], c.strides[1]}, pad,
                                  {c.dilation_rate[0], c.dilation_rate[1]}, c.groups);
  return y.permute({0, 2, 3, 1});
}

torch::Tensor MaxPool1D(const torch::Tensor& x, const keras::MaxPooling1DConfig& c) {
  torch::Tensor cf = x.permute({0, 2, 1});
  std::vector<int64_t> pad;
  cf = PadSpatial<1>(cf, c.padding, c.pool_size, c.strides, {1},
                     -std::numeric_limits<double>::infinity(), &pad);
  return torch::max_pool1d(cf, {c.pool_size[0]}, {c.strides[0]}, pad).permute({0, 2, 1});
}

namespace {

// MaxPooling2D through cpu_kernels' loops: one pass forward, one back; the window
// position of each maximum is kept in a byte (LibTorch keeps an int64 index).
class MaxPool2DLoops : public torch::autograd::Function<MaxPool2DLoops> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const MaxPool2DShape& s, bool relu) {
    RECORD_FUNCTION("cohort::MaxPool2D", std::vector<c10::IValue>({x}));
    torch::Tensor in = x.contiguous();
    torch::Tensor out = torch::empty({s.batch, s.out_height, s.out_width, s.channels}, x.options());
    torch::Tensor which = torch::empty(out.sizes(), x.options().dtype(torch::kUInt8));
    MaxPool2DForward(in.data_ptr<float>(), s, relu, out.data_ptr<float>(),
                     which.data_ptr<uint8_t>());
    ctx->saved_data["which"] = which;
    SaveShape(ctx, "pool", s);
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    MaxPool2DShape s = SavedShape<MaxPool2DShape>(ctx, "pool");
    torch::Tensor which = ctx->saved_data["which"].toTensor();
    torch::Tensor grad_out = grads[0].contiguous();
    torch::Tensor grad_in = torch::empty({s.batch, s.height, s.width, s.channels}, grad_out.options());
    MaxPool2DBackward(grad_out.data_ptr<float>(), which.data_ptr<uint8_t>(), s,
                      grad_in.data_ptr<float>());
    return {grad_in, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor MaxPool2D(const torch::Tensor& x, const keras::MaxPooling2DConfig& c, bool relu) {
  if (x.dim() == 4 && x.device().is_cpu() && x.scalar_type() == torch::kFloat) {
    if (std::optional<MaxPool2DShape> s = LoopPoolShape(x.sizes(), c)) {
      return MaxPool2DLoops::apply(x, *s, relu);
    }
  }
  torch::Tensor cf = (relu ? torch::relu(x) : x).permute({0, 3, 1, 2});
  std::vector<int64_t> pad;
  cf = PadSpatial<2>(cf, c.padding, c.pool_size, c.strides, {1, 1},
                     -std::numeric_limits<double>::infinity(), &pad);
  return torch::max_pool2d(cf, {c.pool_size[0], c.pool_size[1]}, {c.strides[0], c.strides[1]}, pad)
      .permute({0, 2, 3, 1});
}

torch::Tensor Conv2DMaxPool2D(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& bias, const keras::Conv2DConfig& conv,
                              const keras::MaxPooling2DConfig& pool, bool relu) {
  if (std::optional<SmallConvPlan> plan = PlanSmallConv(x, weight, conv)) {
    const Conv2DShape& s = plan->shape;
    std::optional<MaxPool2DShape> p =
        LoopPoolShape({s.batch, s.out_height, s.out_width, s.out_channels}, pool);
    if (p && SmallConv2DMaxPoolSupported(s, *p)) {
      return SmallConv2DLoops::apply(PaddedInput(x, *plan), weight, BiasArgument(bias, x), s, *p,
                                     relu);
    }
  }
  return MaxPool2D(Conv2D(x, weight, bias, conv), pool, relu);
}

torch::Tensor AvgPool2D(const torch::Tensor& x, const keras::AveragePooling2DConfig& c) {
  torch::Tensor cf = x.permute({0, 3, 1, 2});
  std::vector<int64_t> pad;
  torch::Tensor padded = PadSpatial<2>(cf, c.padding, c.pool_size, c.strides, {1, 1}, 0.0, &pad);
  std::vector<int64_t> k{c.pool_size[0], c.pool_size[1]}, s{c.strides[0], c.strides[1]};
  if (padded.sizes() == cf.sizes()) {
    // Symmetric (or no) padding: LibTorch can leave the padding out of the divisor.
    return torch::avg_pool2d(cf, k, s, pad, /*ceil_mode=*/false, /*count_include_pad=*/false)
        .permute({0, 2, 3, 1});
  }
  // Asymmetric: average only the real elements, as Keras does.
  torch::Tensor ones = torch::ones({1, 1, cf.size(2), cf.size(3)}, cf.options());
  std::vector<int64_t> pads;
  int64_t dh = padded.size(2) - cf.size(2), dw = padded.size(3) - cf.size(3);
  pads = {dw / 2, dw - dw / 2, dh / 2, dh - dh / 2};
  torch::Tensor count = torch::avg_pool2d(torch::constant_pad_nd(ones, pads, 0.0), k, s);
  return (torch::avg_pool2d(padded, k, s) / count).permute({0, 2, 3, 1});
}

torch::Tensor KerasReLU(const torch::Tensor& x, const keras::ReLUConfig& c) {
  torch::Tensor positive = c.threshold == 0.0 ? torch::relu(x)
                                              : torch::where(x > c.threshold, x, torch::zeros_like(x));
  if (c.max_value) positive = torch::clamp_max(positive, *c.max_value);
  if (c.negative_slope == 0.0) return positive;
  return positive - c.negative_slope * torch::relu(c.threshold - x);
}

torch::Tensor Dropout(const torch::Tensor& x, const keras::DropoutConfig& c) {
  if (c.rate <= 0.0) return x;
  if (!c.noise_shape) return torch::dropout(x, c.rate, /*train=*/true);
  std::vector<int64_t> shape = *c.noise_shape;
  for (size_t i = 0; i < shape.size() && i < static_cast<size_t>(x.dim()); ++i) {
    if (shape[i] == keras::kUnknownDim) shape[i] = x.size(i);
  }
  torch::Tensor keep = torch::empty(shape, x.options()).bernoulli_(1.0 - c.rate);
  return x * keep / (1.0 - c.rate);
}

torch::Tensor BatchNorm(const torch::Tensor& x, const torch::Tensor& gamma,
                        const torch::Tensor& beta, torch::Tensor& moving_mean,
                        torch::Tensor& moving_variance, const keras::BatchNormalizationConfig& c,
                        bool training) {
  // LibTorch normalizes over every axis but 1: move the channel axis there (a view).
  torch::Tensor cf = c.axis == 1 ? x : x.movedim(c.axis, 1);
  torch::Tensor out;
  if (training) {
    // Output and gradients from LibTorch's fused kernel (it normalizes with the biased
    // variance, as Keras does); the moving statistics are updated here because
    // LibTorch would keep the unbiased variance.
    out = torch::batch_norm(cf, gamma, beta, /*running_mean=*/{}, /*running_var=*/{},
                            /*training=*/true, /*momentum=*/0.0, c.epsilon, /*cudnn=*/true);
    torch::NoGradGuard no_grad;
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < cf.dim(); ++d) {
      if (d != 1) dims.push_back(d);
    }
    auto [var, mean] = torch::var_mean(cf, dims, /*unbiased=*/false);
    moving_mean.mul_(c.momentum).add_(mean, 1.0 - c.momentum);
    moving_variance.mul_(c.momentum).add_(var, 1.0 - c.momentum);
  } else {
    out = torch::batch_norm(cf, gamma, beta, moving_mean, moving_variance, /*training=*/false,
                            0.0, c.epsilon, /*cudnn=*/true);
  }
  return c.axis == 1 ? out : out.movedim(1, c.axis);
}

torch::Tensor LayerNorm(const torch::Tensor& x, const torch::Tensor& gamma,
                        const torch::Tensor& beta, const keras::LayerNormalizationConfig& c) {
  bool trailing = true;
  for (size_t i = 0; i < c.axes.size(); ++i) {
    trailing = trailing && c.axes[i] == x.dim() - static_cast<int64_t>(c.axes.size() - i);
  }
  if (trailing) {
    std::vector<int64_t> normalized(x.sizes().end() - c.axes.size(), x.sizes().end());
    return torch::layer_norm(x, normalized, gamma, beta, c.epsilon);
  }
  // Other axes: the same formula, by hand; gamma and beta broadcast along the
  // normalized axes.
  std::vector<int64_t> dims(c.axes.begin(), c.axes.end());
  auto [var, mean] = torch::var_mean(x, dims, /*unbiased=*/false, /*keepdim=*/true);
  torch::Tensor y = (x - mean) * torch::rsqrt(var + c.epsilon);
  std::vector<int64_t> shape(x.dim(), 1);
  for (int a : c.axes) shape[a] = x.size(a);
  if (gamma.defined()) y = y * gamma.reshape(shape);
  if (beta.defined()) y = y + beta.reshape(shape);
  return y;
}

}  // namespace cohort::trainer
