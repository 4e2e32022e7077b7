#pragma once

// Keras' initializers (see keras::Initializer) as LibTorch tensors. Values are drawn on
// the CPU from a generator seeded by the caller, so every rank computes the same
// initial weights; Keras' own random streams are not reproduced (a model saved with
// weights starts from those instead).

#include <cstdint>

#include <torch/torch.h>

#include "common/keras/model_ir.h"

namespace cohort::trainer {

// A float32 CPU tensor of `shape` (Keras layout: kernels are (k..., in, out)).
torch::Tensor InitializeVariable(const keras::Initializer& init, const keras::Shape& shape,
                                 uint64_t seed);

}  // namespace cohort::trainer
