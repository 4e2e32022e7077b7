#pragma once

// Per-sample tensor shapes, as the model IR and the data checks use them.

#include <cstdint>
#include <string>
#include <vector>

namespace cohort::keras {

// A dimension Keras writes as None: not known until data arrives.
inline constexpr int64_t kUnknownDim = -1;

// A per-sample shape: the batch dimension excluded; kUnknownDim for None.
using Shape = std::vector<int64_t>;

// "(8, 8, 16)", "(None, 4)", "(10,)", "()" — Python's tuple notation, as Keras prints.
std::string ShapeToString(const Shape& shape);

}  // namespace cohort::keras
