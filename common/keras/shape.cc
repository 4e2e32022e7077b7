#include "common/keras/shape.h"

#include "absl/strings/str_cat.h"

namespace cohort::keras {

std::string ShapeToString(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) absl::StrAppend(&out, ", ");
    if (shape[i] == kUnknownDim) {
      absl::StrAppend(&out, "None");
    } else {
      absl::StrAppend(&out, shape[i]);
    }
  }
  if (shape.size() == 1) absl::StrAppend(&out, ",");
  absl::StrAppend(&out, ")");
  return out;
}

}  // namespace cohort::keras
