#pragma once

// Keras layer computations on channels_last LibTorch tensors. Each function takes the
// batch (N, ...) and returns the batch, differentiable through LibTorch's autograd.

#include <torch/torch.h>

#include "common/keras/model_ir.h"

namespace cohort::trainer {

torch::Tensor ApplyActivation(const torch::Tensor& x, keras::Activation activation);

// x (..., in) @ kernel (in, units) + bias (may be undefined): a Dense layer without its
// activation. Float32 on the CPU (not under autocast) runs its forward and backward
// products through gemm.h's Sgemm, as DenseGraph does; anything else through LibTorch's
// addmm / matmul.
torch::Tensor Dense(const torch::Tensor& x, const torch::Tensor& kernel, const torch::Tensor& bias);

// Conv1D / Conv2D on (N, T, C) / (N, H, W, C). `weight` is LibTorch's
// (filters, in/groups, k...); `bias` may be undefined.
torch::Tensor Conv1D(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const keras::Conv1DConfig& c);
torch::Tensor Conv2D(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const keras::Conv2DConfig& c);

torch::Tensor MaxPool1D(const torch::Tensor& x, const keras::MaxPooling1DConfig& c);
// With `relu`, of relu(x): the rectifier of the layer before, folded in (through
// Conv2DMaxPool2D, below). Float32 on
// the CPU runs through cpu_kernels' loops (MaxPool2DForward), bit for bit as LibTorch's
// max_pool2d (and relu) compute it; anything else through LibTorch's ops.
torch::Tensor MaxPool2D(const torch::Tensor& x, const keras::MaxPooling2DConfig& c,
                        bool relu = false);
// MaxPool2D(Conv2D(x, ...), pool, relu): a Conv2D with activation "relu" (`relu`) or
// none whose only reader is a MaxPooling2D (KerasModel runs them so). When the
// convolution runs through cpu_kernels' loops for few input channels and the windows
// do not overlap, both run as one (SmallConv2DMaxPoolForward), the convolution's
// output never written out; the same bits either way.
torch::Tensor Conv2DMaxPool2D(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& bias, const keras::Conv2DConfig& conv,
                              const keras::MaxPooling2DConfig& pool, bool relu);
torch::Tensor AvgPool2D(const torch::Tensor& x, const keras::AveragePooling2DConfig& c);

torch::Tensor KerasReLU(const torch::Tensor& x, const keras::ReLUConfig& c);

// Dropout with Keras' noise_shape semantics (kUnknownDim entries take x's size).
torch::Tensor Dropout(const torch::Tensor& x, const keras::DropoutConfig& c);

// BatchNormalization over every axis but `c.axis`. In training mode (and when the
// layer is trainable) normalizes with the batch statistics and updates the moving
// ones in place: moving = moving * momentum + batch * (1 - momentum), with the biased
// batch variance, as Keras does. gamma/beta may be undefined (scale/center false).
torch::Tensor BatchNorm(const torch::Tensor& x, const torch::Tensor& gamma,
                        const torch::Tensor& beta, torch::Tensor& moving_mean,
                        torch::Tensor& moving_variance, const keras::BatchNormalizationConfig& c,
                        bool training);

torch::Tensor LayerNorm(const torch::Tensor& x, const torch::Tensor& gamma,
                        const torch::Tensor& beta, const keras::LayerNormalizationConfig& c);

}  // namespace cohort::trainer
