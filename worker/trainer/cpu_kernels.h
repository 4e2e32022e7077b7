#pragma once

// Hand-written loops over the flat float32 buffers of a rank on the CPU, where
// LibTorch's general-purpose ops cost several passes and temporaries.
//
// Measured on the mlp's 235k parameters, one thread (LibTorch 1.13): the NaN check
// `isfinite(grad).all()` took 540 us and Adam's six vectorized ops 390 us, together
// more than a third of a 2.5 ms step. These loops do each in one pass, compiled for
// AVX-512, AVX2 and baseline x86-64 and picked at run time (GCC's target_clones), with
// IEEE arithmetic in the written order (no fused multiply-adds, no fast-math), so every
// machine of one kind computes the same bits. Torch-free.
//
// AllFinite and AdamUpdate split long buffers across the calling thread's OpenMP
// threads (the rank's compute threads), which otherwise wait between matrix products:
// mlp batch 128 on 2 threads, Adam 125 -> 52 us, and the step 137k -> 166k samples/s.
// Split so, AdamUpdate writes the variables with streaming stores where the CPU has
// AVX-512 (cpu_kernels.cc, AdamSliceStreaming: the weights' cache lines are in every
// thread's cache, and an ordinary store waits for them).
// Every element is computed alone, so the split changes no bit.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

namespace cohort::trainer {

// Calls slice(begin, end) on disjoint slices covering [0, n): one per OpenMP thread of
// the calling thread (the rank's compute threads), each a multiple of `align` items
// long, when n is at least 2 * min_items and the caller is not inside a parallel region
// already; else slice(0, n) on the calling thread alone. Nothing for n = 0.
void ParallelSlices(size_t n, size_t align, size_t min_items,
                    const std::function<void(size_t, size_t)>& slice);

// True when no element is NaN or infinite.
bool AllFinite(std::span<const float> values);

struct AdamCoefficients {
  float one_minus_beta_1 = 0;  // 1 - beta_1, in float32 as Keras computes it
  float one_minus_beta_2 = 0;
  float alpha = 0;             // lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
  float epsilon = 0;
};

// One Adam step (without amsgrad) over equally long buffers, in Keras' own order of
// operations (keras/src/optimizers/adam.py):
//   m += (g - m) * (1 - beta_1);  v += (g * g - v) * (1 - beta_2);
//   variable -= (m * alpha) / (sqrt(v) + epsilon)
// `variables_shared`: other processes' cores read the variables too (shared memory), so
// their lines are in other caches even on one thread: streaming stores as when split.
void AdamUpdate(std::span<float> variable, std::span<const float> gradient,
                std::span<float> m, std::span<float> v, const AdamCoefficients& c,
                bool variables_shared = false);

// values rounded to bfloat16 (the upper 16 bits of a float32), to the nearest, ties to
// even, as LibTorch's at::BFloat16 rounds; a NaN becomes the quiet NaN 0x7fc0. Split
// across the OpenMP threads as AllFinite.
void ToBfloat16(std::span<const float> values, uint16_t* out);

// A Dense layer's elementwise work, in one pass over a row-major rows x columns block:
// values += bias (one value per column; none when null), then the rectifier max(v, 0)
// when `relu` (NaN stays NaN, as LibTorch's clamp_min).
void AddBiasRelu(float* values, const float* bias, int64_t rows, int64_t columns, bool relu);

// An Add layer's forward in one pass over `count` elements: sum = a + b, then the
// rectifier when `relu` (as AddBiasRelu: the ReLU that follows the Add in a residual
// block, fused). `sum` may be `a` or `b`. Split across the OpenMP threads as AllFinite.
void AddRelu(const float* a, const float* b, size_t count, bool relu, float* sum);

// Its backward, in one pass: gradient = 0 where output <= 0 when `output` is not null
// (the rectifier's derivative from its output, as LibTorch's threshold_backward), then
// column_sums = the gradient summed over rows (the bias' gradient) when not null: the
// rows in blocks of 64, each block in row order, then the blocks in order (the same
// bits on any number of threads).
void ReluBackwardColumnSums(float* gradient, const float* output, int64_t rows, int64_t columns,
                            float* column_sums);
// AddBiasRelu splits large blocks by rows across the OpenMP threads as AllFinite (mlp
// 1024, 1 x 2: forward 1.29-1.46 -> 1.23-1.27 ms). ReluBackwardColumnSums splits its
// blocks of rows across them (split by columns instead, so that each column was
// summed in row order, it made the backward slower, 1.51-1.73 -> 1.61-1.73 ms).

// MaxPooling2D over channels-last (N, H, W, C) blocks, LibTorch's max_pool2d as it runs
// on them (measured on the cnn's first block, 128 x 26 x 26 x 32, one thread: relu 0.9,
// max_pool2d 2.2, its backward 1.8 plus the zero fill 0.6 and the rectifier's backward
// 2.5 ms, each a pass over 11 MB; these loops make them two passes). Windows are
// clipped to the input (the padding holds no values); a window's maximum is LibTorch's:
// scanned row by row, a value replaces the maximum so far when it is larger or NaN.
// With `relu` the rectifier is applied first, as max_pool2d(relu(x)) computes it
// (max(x, 0) commutes with the maximum, and the first of equal positives is the same).
// `which` records the position in each output's window that its gradient goes to
// (kh * pool_w + kw, counted from the unclipped window's corner), or kNoGradient where
// `relu` makes the window's output 0 (the rectifier passes no gradient there).
struct MaxPool2DShape {
  int64_t batch = 0, height = 0, width = 0, channels = 0;
  int64_t pool_h = 0, pool_w = 0, stride_h = 0, stride_w = 0, pad_top = 0, pad_left = 0;
  int64_t out_height = 0, out_width = 0;
};
constexpr uint8_t kNoGradient = 255;
// Whether the loops take this shape: pool_h * pool_w < kNoGradient, every window holds
// at least one input position, every size positive.
bool MaxPool2DSupported(const MaxPool2DShape& s);
// out: (N, out_height, out_width, C); which: as many bytes. Split by output rows across
// the OpenMP threads as AllFinite.
void MaxPool2DForward(const float* in, const MaxPool2DShape& s, bool relu, float* out,
                      uint8_t* which);
// grad_in (N, H, W, C), every element written: the sum of the gradients routed to it by
// `which`, added in output order as LibTorch's backward adds them (0 + g where one
// gradient reaches it: LibTorch adds into zeros), 0 where none does.
void MaxPool2DBackward(const float* grad_out, const uint8_t* which, const MaxPool2DShape& s,
                       float* grad_in);

// A Conv2D of few input channels (an image model's first layer: 1 to 4) over
// channels-last (N, H, W, C) blocks, already padded. oneDNN 2.6 runs such a layer
// slowly here (the cnn's first, 1 -> 32 channels 3x3 on 128 x 28 x 28: 1.3-1.9 ms
// forward and 1.7-2.6 ms for the kernel's gradient, 15-30 GFLOP/s, against 130-140 for
// its second layer). The forward keeps 8 outputs x 16 channels in registers, the
// kernel's gradient 8 taps x 16 channels. Kernels in Keras' layout (kernel_h, kernel_w,
// in, out). Each output is its taps summed in (kh, kw, in) order, then the bias added;
// the same bits on any number of threads.
struct Conv2DShape {
  int64_t batch = 0, height = 0, width = 0, in_channels = 0, out_channels = 0;
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t out_height = 0, out_width = 0;
};
// in_channels 1 to 4, out_channels a multiple of 16, every size positive, every tap of
// every output inside the input.
bool SmallConv2DSupported(const Conv2DShape& s);
// out: (N, out_height, out_width, out_channels); bias may be null. Split by output rows
// across the OpenMP threads as AllFinite.
void SmallConv2DForward(const float* in, const float* kernel, const float* bias,
                        const Conv2DShape& s, float* out);
// The kernel's gradient (Keras' layout) and the bias' (null: not wanted) for the output
// gradient `grad_out`: summed over each sample's outputs in order, then over the
// samples in order, whatever the threads.
void SmallConv2DParameterGradients(const float* in, const float* grad_out, const Conv2DShape& s,
                                   float* kernel_grad, float* bias_grad);

// Such a Conv2D whose output only a MaxPooling2D of windows that do not overlap reads
// (an image model's first block), in one: the convolution's rows are computed a
// window's height at a time into a buffer of the thread's and pooled from there, so
// its output (the cnn's 11 MB at 128 rows) is never written out, nor is its gradient
// on the way back; rows that no window covers are not computed. The same bits as
// SmallConv2DForward then MaxPool2DForward, and MaxPool2DBackward then
// SmallConv2DParameterGradients. `pool` describes the pooling of the convolution's
// output (height, width, channels: the convolution's out_height, out_width,
// out_channels).
bool SmallConv2DMaxPoolSupported(const Conv2DShape& conv, const MaxPool2DShape& pool);
// out, which: as MaxPool2DForward's. Split by output rows across the OpenMP threads.
void SmallConv2DMaxPoolForward(const float* in, const float* kernel, const float* bias,
                               const Conv2DShape& conv, const MaxPool2DShape& pool, bool relu,
                               float* out, uint8_t* which);
// The parameter gradients for the pooled output's gradient `grad_out`, summed as
// SmallConv2DParameterGradients sums them.
void SmallConv2DMaxPoolParameterGradients(const float* in, const float* grad_out,
                                          const uint8_t* which, const Conv2DShape& conv,
                                          const MaxPool2DShape& pool, float* kernel_grad,
                                          float* bias_grad);

// The rows of a row-major rows x columns block whose largest value is at the column
// `labels` names (sparse categorical accuracy), or, when `labels` is null, at the
// column where the same row of `targets` has its largest (categorical accuracy). The
// largest is LibTorch's argmax: the first of equal values, and a NaN above any number.
int64_t ArgmaxMatches(const float* values, int64_t rows, int64_t columns, const int64_t* labels,
                      const float* targets);

// The loss of a batch and its gradient with respect to the model's last values, in one
// pass over `rows` rows of `columns` values (DenseGraph's loss; losses.h has the
// LibTorch form of the same formulas). Each returns the sum of the rows' losses, in
// double, and writes `scale` times that sum's gradient to `gradient`.

// Softmax cross-entropy from logits, stable form (-log_softmax at the target):
// against integer labels when `labels` is not null (a label outside [0, columns) gives
// a NaN loss), else against target rows (`targets`, rows x columns) mixed with label
// smoothing as Keras does (t * (1 - smoothing) + smoothing / columns). Writes each
// row's softmax to `probabilities` when it is not null.
double SoftmaxCrossEntropy(const float* logits, int64_t rows, int64_t columns,
                           const int64_t* labels, const float* targets, float label_smoothing,
                           float scale, float* probabilities, float* gradient);

// Mean squared error per row: mean over the row of (prediction - target)^2.
double SquaredError(const float* prediction, const float* targets, int64_t rows, int64_t columns,
                    float scale, float* gradient);

}  // namespace cohort::trainer
