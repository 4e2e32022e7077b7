// cpu_kernels' loops behind layer_ops against LibTorch's ops, which the same functions
// run for any tensor but float32 on the CPU (here: float64, exact for these inputs).
// MaxPool2D: the same outputs and gradients, for windows that tile, leave rows out,
// overlap, or are clipped by "same" padding, with ties, NaNs and non-positive windows.
// Conv2D of few input channels: the same outputs and parameter gradients, for strides,
// dilations and both paddings, alone and with the MaxPooling2D that reads it (run as
// one where the windows do not overlap). Dense: gemm.h's products give LibTorch's
// outputs and gradients, with and without a bias or the input's gradient, on matrices
// and sequences. Each on 1 and 2 threads.

#include "worker/trainer/layer_ops.h"

#include <omp.h>

#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

namespace cohort::trainer {
namespace {

// Equal as values (0 == -0), NaN where the other is NaN.
bool SameValues(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  torch::Tensor x = a.to(torch::kDouble), y = b.to(torch::kDouble);
  return ((x == y) | (x.isnan() & y.isnan())).all().item<bool>();
}

// run(float32) on `threads` OpenMP threads (the loops), then run(float64) on one
// (LibTorch's ops, exact for these inputs): {loops, reference}.
template <typename RunFn>
auto LoopsAndReference(int threads, RunFn&& run) {
  omp_set_num_threads(threads);
  auto loops = run(torch::kFloat);
  omp_set_num_threads(1);
  return std::make_pair(loops, run(torch::kDouble));
}

// `t` in `dtype`, a leaf that requires its gradient; undefined stays undefined.
torch::Tensor Variable(const torch::Tensor& t, torch::ScalarType dtype) {
  return t.defined() ? t.to(dtype).detach().set_requires_grad(true) : t;
}

// The gradient of a Variable in float32; undefined for an undefined one.
torch::Tensor Float32Grad(const torch::Tensor& t) {
  return t.defined() ? t.grad().to(torch::kFloat) : t;
}

struct Pooled {
  torch::Tensor out, grad;
};

// The pooling of `x` in `dtype` (float32: the loops; float64: LibTorch's ops, exact for
// these inputs), its gradient for the loss sum(out * weights).
Pooled Pool(const torch::Tensor& x, const torch::Tensor& weights, torch::ScalarType dtype,
            const keras::MaxPooling2DConfig& c, bool relu) {
  torch::Tensor input = x.to(dtype).detach().set_requires_grad(true);
  torch::Tensor out = MaxPool2D(input, c, relu);
  (out * weights.to(dtype)).sum().backward();
  return {out.detach().to(torch::kFloat), input.grad().to(torch::kFloat)};
}

keras::MaxPooling2DConfig Config(int64_t ph, int64_t pw, int64_t sh, int64_t sw,
                                 keras::Padding padding) {
  keras::MaxPooling2DConfig c;
  c.pool_size = {ph, pw};
  c.strides = {sh, sw};
  c.padding = padding;
  return c;
}

TEST_CASE("MaxPool2D's loops give LibTorch's outputs and gradients", "[layer_ops]") {
  struct Case {
    std::string name;
    int64_t h, w, channels;
    keras::MaxPooling2DConfig config;
  };
  const Case cases[] = {
      {"2x2 windows tiling 26x26, 32 channels", 26, 26, 32, Config(2, 2, 2, 2, keras::Padding::kValid)},
      {"2x2 windows leaving the last row and column out", 11, 11, 64, Config(2, 2, 2, 2, keras::Padding::kValid)},
      {"'same' windows clipped at the far edge", 7, 9, 3, Config(2, 2, 2, 2, keras::Padding::kSame)},
      {"overlapping 3x3 windows, stride 2", 9, 8, 70, Config(3, 3, 2, 2, keras::Padding::kValid)},
      {"overlapping 'same' windows, stride 1, padded on both sides", 6, 5, 5, Config(3, 3, 1, 1, keras::Padding::kSame)},
      {"2x3 windows, strides 3x2, gaps between rows", 10, 9, 1, Config(2, 3, 3, 2, keras::Padding::kValid)},
  };
  for (const Case& k : cases) {
    for (bool relu : {false, true}) {
      for (int threads : {1, 2}) {
        DYNAMIC_SECTION(k.name << (relu ? ", relu folded in" : "") << ", " << threads << " thread(s)") {
          torch::manual_seed(7);
          // Few distinct values, so windows hold ties; about a third of them negative;
          // a few NaNs.
          torch::Tensor x = torch::randint(-3, 6, {4, k.h, k.w, k.channels}).to(torch::kFloat);
          x.masked_fill_(torch::rand(x.sizes()) < 0.02, std::nan(""));
          torch::Tensor probe = MaxPool2D(x, k.config);
          // Small integers: sums of gradients are exact in float32 and float64 alike.
          torch::Tensor weights = torch::randint(-4, 5, probe.sizes()).to(torch::kFloat);
          auto [loops, reference] = LoopsAndReference(
              threads, [&](torch::ScalarType dtype) { return Pool(x, weights, dtype, k.config, relu); });
          CHECK(SameValues(loops.out, reference.out));
          CHECK(SameValues(loops.grad, reference.grad));
          // The test would catch a gradient routed to the wrong place: some do flow.
          CHECK(reference.grad.abs().nan_to_num(0).sum().item<double>() > 0);
        }
      }
    }
  }
}

keras::Conv2DConfig ConvConfig(int64_t filters, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                               int64_t dh, int64_t dw, keras::Padding padding) {
  keras::Conv2DConfig c;
  c.filters = filters;
  c.kernel_size = {kh, kw};
  c.strides = {sh, sw};
  c.dilation_rate = {dh, dw};
  c.padding = padding;
  return c;
}

// A Conv2D's input (batch, h, w, in) and parameters, small integers (every sum exact in
// float32 and float64 alike).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> RandomConv(int64_t batch, int64_t h,
                                                                   int64_t w, int64_t in,
                                                                   const keras::Conv2DConfig& c) {
  return {torch::randint(-3, 4, {batch, h, w, in}).to(torch::kFloat),
          torch::randint(-2, 3, {c.filters, in, c.kernel_size[0], c.kernel_size[1]}).to(torch::kFloat),
          torch::randint(-5, 6, {c.filters}).to(torch::kFloat)};
}

struct Convolved {
  torch::Tensor out, weight_grad, bias_grad;
};

// Conv2D of `x` in `dtype`, and the gradients of its parameters for the loss
// sum(out * weights).
Convolved Convolve(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                   const torch::Tensor& weights, torch::ScalarType dtype,
                   const keras::Conv2DConfig& c) {
  torch::Tensor w = weight.to(dtype).detach().set_requires_grad(true);
  torch::Tensor b = Variable(bias, dtype);
  torch::Tensor out = Conv2D(x.to(dtype), w, b, c);
  (out * weights.to(dtype)).sum().backward();
  return {out.detach().to(torch::kFloat), w.grad().to(torch::kFloat), Float32Grad(b)};
}

TEST_CASE("Conv2D's loops for few input channels give LibTorch's outputs and gradients",
          "[layer_ops]") {
  struct Case {
    std::string name;
    int64_t h, w, in;
    keras::Conv2DConfig config;
  };
  const Case cases[] = {
      {"3x3, 1 -> 32 channels, the cnn's first layer", 28, 28, 1, ConvConfig(32, 3, 3, 1, 1, 1, 1, keras::Padding::kValid)},
      {"3x3 'same', 3 -> 16 channels, stride 2", 9, 10, 3, ConvConfig(16, 3, 3, 2, 2, 1, 1, keras::Padding::kSame)},
      {"2x3, 4 -> 48 channels, strides 1x2, dilation 2x1", 11, 13, 4, ConvConfig(48, 2, 3, 1, 2, 2, 1, keras::Padding::kValid)},
      {"5x5 'same', 2 -> 16 channels, a row narrower than a block", 6, 3, 2, ConvConfig(16, 5, 5, 1, 1, 1, 1, keras::Padding::kSame)},
  };
  for (const Case& k : cases) {
    for (int threads : {1, 2}) {
      DYNAMIC_SECTION(k.name << ", " << threads << " thread(s)") {
        torch::manual_seed(3);
        // Small integers: every sum is exact in float32 and float64 alike.
        auto [x, weight, bias] = RandomConv(5, k.h, k.w, k.in, k.config);
        torch::Tensor probe = Conv2D(x.to(torch::kDouble), weight.to(torch::kDouble),
                                     bias.to(torch::kDouble), k.config);
        torch::Tensor weights = torch::randint(-2, 3, probe.sizes()).to(torch::kFloat);
        auto [loops, reference] = LoopsAndReference(threads, [&](torch::ScalarType dtype) {
          return Convolve(x, weight, bias, weights, dtype, k.config);
        });
        CHECK(SameValues(loops.out, reference.out));
        CHECK(SameValues(loops.weight_grad, reference.weight_grad));
        CHECK(SameValues(loops.bias_grad, reference.bias_grad));
        CHECK(loops.weight_grad.abs().sum().item<double>() > 0);
      }
    }
  }
}

struct ConvPooled {
  torch::Tensor out, weight_grad, bias_grad;
  std::string node;  // the autograd node that made `out`
};

// Conv2DMaxPool2D of `x` in `dtype`, and the gradients of the convolution's parameters
// for the loss sum(out * weights).
ConvPooled ConvPool(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                    const torch::Tensor& weights, torch::ScalarType dtype,
                    const keras::Conv2DConfig& conv, const keras::MaxPooling2DConfig& pool,
                    bool relu) {
  torch::Tensor w = weight.to(dtype).detach().set_requires_grad(true);
  torch::Tensor b = Variable(bias, dtype);
  torch::Tensor out = Conv2DMaxPool2D(x.to(dtype), w, b, conv, pool, relu);
  std::string node = out.grad_fn()->name();
  (out * weights.to(dtype)).sum().backward();
  return {out.detach().to(torch::kFloat), w.grad().to(torch::kFloat), Float32Grad(b), node};
}

TEST_CASE("A Conv2D of few input channels and its MaxPooling2D give LibTorch's outputs and "
          "gradients", "[layer_ops]") {
  struct Case {
    std::string name;
    int64_t h, w, in;
    keras::Conv2DConfig conv;
    keras::MaxPooling2DConfig pool;
    bool fused;  // through SmallConv2DMaxPoolForward, else the two loops one after the other
  };
  const Case cases[] = {
      {"the cnn's first block: 3x3, 1 -> 32 channels, 2x2 windows", 28, 28, 1,
       ConvConfig(32, 3, 3, 1, 1, 1, 1, keras::Padding::kValid), Config(2, 2, 2, 2, keras::Padding::kValid), true},
      {"a convolution row and column that no window covers", 13, 12, 2,
       ConvConfig(16, 3, 3, 1, 1, 1, 1, keras::Padding::kValid), Config(2, 2, 2, 2, keras::Padding::kValid), true},
      {"'same' convolution, 'same' windows clipped at the far edge", 7, 9, 3,
       ConvConfig(16, 3, 3, 1, 1, 1, 1, keras::Padding::kSame), Config(2, 2, 2, 2, keras::Padding::kSame), true},
      {"strided, dilated convolution; 2x3 windows, strides 3x2, gaps between rows", 17, 14, 4,
       ConvConfig(48, 2, 3, 1, 2, 2, 1, keras::Padding::kValid), Config(2, 3, 3, 3, keras::Padding::kValid), true},
      {"3x3 windows, stride 3, 'same' padding on both sides", 11, 11, 1,
       ConvConfig(16, 2, 2, 1, 1, 1, 1, keras::Padding::kValid), Config(3, 3, 3, 3, keras::Padding::kSame), true},
      {"overlapping windows: the two loops apart", 12, 12, 1,
       ConvConfig(16, 3, 3, 1, 1, 1, 1, keras::Padding::kValid), Config(3, 3, 2, 2, keras::Padding::kValid), false},
  };
  for (const Case& k : cases) {
    for (bool relu : {false, true}) {
      for (int threads : {1, 2}) {
        DYNAMIC_SECTION(k.name << (relu ? ", relu" : "") << ", " << threads << " thread(s)") {
          torch::manual_seed(11);
          // Small integers: every sum is exact in float32 and float64 alike, and windows
          // hold ties.
          auto [x, weight, bias] = RandomConv(5, k.h, k.w, k.in, k.conv);
          torch::Tensor probe = Conv2DMaxPool2D(x.to(torch::kDouble), weight.to(torch::kDouble),
                                                bias.to(torch::kDouble), k.conv, k.pool, relu);
          torch::Tensor weights = torch::randint(-2, 3, probe.sizes()).to(torch::kFloat);
          auto [loops, reference] = LoopsAndReference(threads, [&](torch::ScalarType dtype) {
            return ConvPool(x, weight, bias, weights, dtype, k.conv, k.pool, relu);
          });
          CHECK(SameValues(loops.out, reference.out));
          CHECK(SameValues(loops.weight_grad, reference.weight_grad));
          CHECK(SameValues(loops.bias_grad, reference.bias_grad));
          CHECK(loops.weight_grad.abs().sum().item<double>() > 0);
          CHECK((loops.node.find("SmallConv2DLoops") != std::string::npos) == k.fused);
        }
      }
    }
  }
}

struct Densed {
  torch::Tensor out, input_grad, kernel_grad, bias_grad;  // undefined where none is asked
  std::string node;  // the autograd node that made `out`, or of its 2-D form
};

// Dense of `x` in `dtype` (float32: gemm.h's products; float64: LibTorch's), and the
// gradients for the loss sum(out * weights) of what requires one.
Densed DenseOf(const torch::Tensor& x, const torch::Tensor& kernel, const torch::Tensor& bias,
               const torch::Tensor& weights, torch::ScalarType dtype, bool input_grad) {
  torch::Tensor in = x.to(dtype).detach().set_requires_grad(input_grad);
  torch::Tensor k = Variable(kernel, dtype);
  torch::Tensor b = Variable(bias, dtype);
  torch::Tensor out = Dense(in, k, b);
  torch::autograd::Node* node = out.grad_fn().get();
  if (out.dim() > 2) node = node->next_edges()[0].function.get();  // the 2-D product's
  std::string name = node->name();
  (out * weights.to(dtype)).sum().backward();
  return {out.detach().to(torch::kFloat), input_grad ? Float32Grad(in) : torch::Tensor(),
          Float32Grad(k), Float32Grad(b), name};
}

TEST_CASE("Dense's products through gemm.h give LibTorch's outputs and gradients", "[layer_ops]") {
  struct Case {
    std::string name;
    std::vector<int64_t> x_shape;
    int64_t units;
    bool bias, input_grad;
  };
  const Case cases[] = {
      {"the cnn's head: 1600 -> 10, the input's gradient too", {33, 1600}, 10, true, true},
      {"the model's input: no input gradient", {17, 24}, 40, true, false},
      {"no bias", {9, 31}, 7, false, true},
      {"a batch of sequences (N, T, in)", {5, 6, 12}, 20, true, true},
  };
  for (const Case& k : cases) {
    for (int threads : {1, 2}) {
      DYNAMIC_SECTION(k.name << ", " << threads << " thread(s)") {
        torch::manual_seed(5);
        // Small integers: every sum is exact in float32 and float64 alike.
        torch::Tensor x = torch::randint(-3, 4, k.x_shape).to(torch::kFloat);
        torch::Tensor kernel = torch::randint(-2, 3, {k.x_shape.back(), k.units}).to(torch::kFloat);
        torch::Tensor bias = k.bias ? torch::randint(-5, 6, {k.units}).to(torch::kFloat) : torch::Tensor();
        std::vector<int64_t> out_shape = k.x_shape;
        out_shape.back() = k.units;
        torch::Tensor weights = torch::randint(-2, 3, out_shape).to(torch::kFloat);
        auto [products, reference] = LoopsAndReference(threads, [&](torch::ScalarType dtype) {
          return DenseOf(x, kernel, bias, weights, dtype, k.input_grad);
        });
        CHECK(products.out.sizes() == torch::IntArrayRef(out_shape));
        CHECK(SameValues(products.out, reference.out));
        CHECK(SameValues(products.kernel_grad, reference.kernel_grad));
        CHECK(products.kernel_grad.abs().sum().item<double>() > 0);
        CHECK(products.input_grad.defined() == k.input_grad);
        if (k.input_grad) CHECK(SameValues(products.input_grad, reference.input_grad));
        CHECK(products.bias_grad.defined() == k.bias);
        if (k.bias) CHECK(SameValues(products.bias_grad, reference.bias_grad));
        CHECK(products.node.find("DenseProduct") != std::string::npos);
        CHECK(reference.node.find("DenseProduct") == std::string::npos);
      }
    }
  }
}

TEST_CASE("Conv2D's loops for few input channels run without a bias", "[layer_ops]") {
  // A Conv2D with use_bias false, alone and with its MaxPooling2D: LibTorch 1.13's
  // autograd Functions take no undefined tensor, so the loops get an empty one.
  const keras::Conv2DConfig conv = ConvConfig(16, 3, 3, 1, 1, 1, 1, keras::Padding::kValid);
  const keras::MaxPooling2DConfig pool = Config(2, 2, 2, 2, keras::Padding::kValid);
  torch::manual_seed(13);
  auto [x, weight, unused] = RandomConv(3, 10, 10, 1, conv);
  torch::Tensor weights = torch::randint(-2, 3, {3, 8, 8, 16}).to(torch::kFloat);
  torch::Tensor pooled_weights = torch::randint(-2, 3, {3, 4, 4, 16}).to(torch::kFloat);
  auto [loops, reference] = LoopsAndReference(1, [&](torch::ScalarType dtype) {
    return Convolve(x, weight, torch::Tensor(), weights, dtype, conv);
  });
  CHECK(SameValues(loops.out, reference.out));
  CHECK(SameValues(loops.weight_grad, reference.weight_grad));
  CHECK_FALSE(loops.bias_grad.defined());
  auto [fused, fused_reference] = LoopsAndReference(1, [&](torch::ScalarType dtype) {
    return ConvPool(x, weight, torch::Tensor(), pooled_weights, dtype, conv, pool, true);
  });
  CHECK(fused.node.find("SmallConv2DLoops") != std::string::npos);
  CHECK(SameValues(fused.out, fused_reference.out));
  CHECK(SameValues(fused.weight_grad, fused_reference.weight_grad));
  CHECK(fused.weight_grad.abs().sum().item<double>() > 0);
}

TEST_CASE("MaxPool2D's loops keep LibTorch's error for a window larger than the input",
          "[layer_ops]") {
  torch::Tensor x = torch::zeros({1, 1, 3, 2});
  CHECK_THROWS(MaxPool2D(x, Config(2, 2, 2, 2, keras::Padding::kValid)));
}

}  // namespace
}  // namespace cohort::trainer
