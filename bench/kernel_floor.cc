// kernel_floor: the speed limit of training one of bench/'s models on this machine's
// CPU threads: only the model's forward and backward matrix products and convolutions,
// called back to back in a tight loop: matrix products on preallocated outputs
// (through worker/trainer/gemm.h, the library the trainer's Dense step uses: oneDNN's
// sgemm where LibTorch brought it, else the BLAS'), convolutions through the functional ops autograd calls (at::convolution,
// at::convolution_backward; see AddConv) or, for a first layer of few channels, the
// trainer's own loops (cpu_kernels.h), with LibTorch's intra-op thread pool of
// --threads threads. No activations, pooling, loss, optimizer or autograd: whatever a
// framework does on top of this is its overhead.
//
//   kernel_floor --model mlp|cnn|residual --batch 128 --threads 2 --seconds 5
//
// prints ONE JSON line:
//   {"peer": "kernel_floor", "model": "mlp", "batch": 128, "threads": 2, "steps": 4321,
//    "seconds": 5.0, "samples_per_second": 110000.0, "user_s": 9.9, "sys_s": 0.01,
//    "max_rss_kb": 123456}
// The shapes are those of examples/mnist_{mlp,cnn,residual}.keras (Dense weights are
// (in, out) as Keras stores them; convolution activations are channels-last in memory,
// by default, as Cohort's trainer keeps them; --layout nchw for PyTorch's default).
// A benchmark, not a part of Cohort: it includes LibTorch headers, and of Cohort links
// only the torch-free loops the trainer computes with (gemm.h, cpu_kernels.h) and the
// trainer's allocator (allocator.h), so that its blocks of 1 MiB and more lie on the
// same pages as the trainer's (2 MiB aligned, huge pages where the kernel gives them).

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "worker/trainer/allocator.h"
#include "worker/trainer/cpu_kernels.h"
#include "worker/trainer/gemm.h"

namespace {

using cohort::trainer::Sgemm;
using Clock = std::chrono::steady_clock;
using Kernel = std::function<void()>;

float* Floats(const at::Tensor& t) { return t.data_ptr<float>(); }

// Forward and backward products of a Dense layer x(b, in) @ W(in, out).
// `input_grad`: whether backward computes dx (not for the first layer: the data has no
// gradient).
void AddDense(std::vector<Kernel>& forward, std::vector<Kernel>& backward, int64_t batch,
              int64_t in, int64_t out, bool input_grad) {
  auto opts = at::TensorOptions().dtype(at::kFloat);
  at::Tensor x = at::rand({batch, in}, opts), w = at::rand({in, out}, opts);
  at::Tensor y = at::empty({batch, out}, opts), dy = at::rand({batch, out}, opts);
  at::Tensor dw = at::empty({in, out}, opts), dx = at::empty({batch, in}, opts);
  // The products the trainer's Dense step runs (gemm.h), on the same library.
  forward.push_back([=] { Sgemm(false, false, batch, out, in, Floats(x), in, Floats(w), out, 0, Floats(y), out); });
  backward.insert(backward.begin(), [=] {
    Sgemm(true, false, in, out, batch, Floats(x), in, Floats(dy), out, 0, Floats(dw), out);
    if (input_grad) Sgemm(false, true, batch, in, out, Floats(dy), out, Floats(w), out, 0, Floats(dx), in);
  });
}

// A 'valid' 3x3 stride-1 Conv2D of `cin` -> `cout` channels on `size` x `size` inputs.
// LibTorch 1.13's out= forms of convolution are composites that compute into a fresh
// tensor and copy (and need every output of the backward defined): slower than what
// autograd calls. So the convolutions call the same functional ops as autograd
// (at::convolution, at::convolution_backward), whose outputs the allocator recycles;
// `channels_last` picks the memory format (Cohort keeps activations channels-last).
void AddConv(std::vector<Kernel>& forward, std::vector<Kernel>& backward, int64_t batch,
             int64_t cin, int64_t cout, int64_t size, bool input_grad, bool channels_last) {
  auto opts = at::TensorOptions().dtype(at::kFloat);
  auto format = channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  int64_t osize = size - 2;
  at::Tensor x = at::rand({batch, cin, size, size}, opts).contiguous(format);
  at::Tensor w = at::rand({cout, cin, 3, 3}, opts).contiguous(format);
  at::Tensor b = at::rand({cout}, opts);
  at::Tensor dy = at::rand({batch, cout, osize, osize}, opts).contiguous(format);
  cohort::trainer::Conv2DShape shape{.batch = batch, .height = size, .width = size,
                                     .in_channels = cin, .out_channels = cout, .kernel_h = 3,
                                     .kernel_w = 3, .out_height = osize, .out_width = osize};
  if (channels_last && !input_grad && cohort::trainer::SmallConv2DSupported(shape)) {
    // The trainer's loops for a first layer of few channels (cpu_kernels.h), which
    // beat oneDNN's convolution there: x, dy (N, H, W, C), kernels (3, 3, in, out).
    at::Tensor kernel = at::rand({3, 3, cin, cout}, opts), y = at::empty({batch, osize, osize, cout}, opts);
    at::Tensor dk = at::empty_like(kernel), db = at::empty_like(b);
    forward.push_back([=] {
      cohort::trainer::SmallConv2DForward(Floats(x), Floats(kernel), Floats(b), shape, Floats(y));
    });
    backward.insert(backward.begin(), [=] {
      cohort::trainer::SmallConv2DParameterGradients(Floats(x), Floats(dy), shape, Floats(dk), Floats(db));
    });
    return;
  }
  forward.push_back([=] { at::convolution(x, w, b, {1, 1}, {0, 0}, {1, 1}, false, {0, 0}, 1); });
  backward.insert(backward.begin(), [=] {
    at::convolution_backward(dy, x, w, at::IntArrayRef{cout}, {1, 1}, {0, 0}, {1, 1}, false,
                             {0, 0}, 1, {input_grad, true, true});
  });
}

bool Build(const std::string& model, int64_t batch, bool channels_last,
           std::vector<Kernel>& kernels) {
  std::vector<Kernel> forward, backward;
  if (model == "mlp") {
    AddDense(forward, backward, batch, 784, 256, false);
    AddDense(forward, backward, batch, 256, 128, true);
    AddDense(forward, backward, batch, 128, 10, true);
  } else if (model == "residual") {
    AddDense(forward, backward, batch, 784, 256, false);
    for (int block = 0; block < 2; ++block) {
      AddDense(forward, backward, batch, 256, 256, true);
      AddDense(forward, backward, batch, 256, 256, true);
    }
    AddDense(forward, backward, batch, 256, 10, true);
  } else if (model == "cnn") {
    AddConv(forward, backward, batch, 1, 32, 28, false, channels_last);   // -> 26, pooled to 13
    AddConv(forward, backward, batch, 32, 64, 13, true, channels_last);   // -> 11, pooled to 5
    AddDense(forward, backward, batch, 5 * 5 * 64, 10, true);
  } else {
    return false;
  }
  kernels = forward;
  kernels.insert(kernels.end(), backward.begin(), backward.end());
  return true;
}

double CpuSeconds(const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; }

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  int64_t batch = 128;
  int threads = 1;
  double seconds = 5;
  int warmup = 20;
  bool channels_last = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") model = value;
    else if (flag == "--batch") batch = std::atoll(value.c_str());
    else if (flag == "--threads") threads = std::atoi(value.c_str());
    else if (flag == "--seconds") seconds = std::atof(value.c_str());
    else if (flag == "--warmup") warmup = std::atoi(value.c_str());
    else if (flag == "--layout") channels_last = value != "nchw";
    else {
      std::fprintf(stderr, "kernel_floor: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (argc % 2 == 0 || batch <= 0 || threads <= 0 || seconds <= 0) {
    std::fprintf(stderr, "usage: kernel_floor --model mlp|cnn|residual [--batch N] "
                         "[--threads N] [--seconds S] [--warmup STEPS] [--layout nchw|nhwc]\n");
    return 2;
  }
  cohort::trainer::CacheLargeCpuBlocks();  // before the first allocation, as the trainer
  at::set_num_threads(threads);
  std::vector<Kernel> kernels;
  if (!Build(model, batch, channels_last, kernels)) {
    std::fprintf(stderr, "kernel_floor: --model %s: known models are mlp, cnn, residual\n",
                 model.c_str());
    return 2;
  }
  auto step = [&] {
    for (Kernel& k : kernels) k();
  };
  // The first steps are slow (oneDNN generates its kernels, the caches fill), so the
  // step count comes from the warm-up's second half alone; timed from the whole warm-up,
  // the run measured a fraction of --seconds.
  const int half = warmup / 2;
  for (int i = 0; i < half; ++i) step();
  Clock::time_point start = Clock::now();
  for (int i = half; i < warmup; ++i) step();
  double warm_s = std::chrono::duration<double>(Clock::now() - start).count();
  int64_t steps = std::max<int64_t>(
      10, static_cast<int64_t>(seconds * (warmup - half) / std::max(warm_s, 1e-9)));

  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  start = Clock::now();
  for (int64_t i = 0; i < steps; ++i) step();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  getrusage(RUSAGE_SELF, &after);
  std::printf(
      "{\"peer\": \"kernel_floor\", \"model\": \"%s\", \"batch\": %lld, \"threads\": %d, "
      "\"steps\": %lld, \"seconds\": %.4f, \"samples_per_second\": %.1f, \"user_s\": %.3f, "
      "\"sys_s\": %.3f, \"max_rss_kb\": %ld}\n",
      model.c_str(), static_cast<long long>(batch), threads, static_cast<long long>(steps),
      elapsed, static_cast<double>(steps * batch) / elapsed,
      CpuSeconds(after.ru_utime) - CpuSeconds(before.ru_utime),
      CpuSeconds(after.ru_stime) - CpuSeconds(before.ru_stime), after.ru_maxrss);
  return 0;
}
