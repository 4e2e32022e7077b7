#include "common/keras/data_check.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/keras/shape_math.h"
#include "common/status_macros.h"

namespace cohort::keras {
namespace {

bool Matches(const Shape& want, const Shape& got) {
  if (want.size() != got.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != kUnknownDim && got[i] != kUnknownDim && want[i] != got[i]) return false;
  }
  return true;
}

Shape Rows(const ArraySpec& a) { return Shape(a.shape.begin() + 1, a.shape.end()); }

Shape WithTrailingOne(Shape s) {
  s.push_back(1);
  return s;
}

// The first node that reads the model's input.
const Node* InputConsumer(const ModelIr& model) {
  for (const Node& node : model.nodes) {
    for (int p : node.inputs) {
      if (p == 0) return &node;
    }
  }
  return nullptr;
}

absl::Status CheckX(const ModelIr& model, const ArraySpec& x) {
  const Node& input = model.input();
  const Shape& want = model.input_config().shape;
  Shape got = Rows(x);
  if (!Matches(want, got)) {
    const Node* consumer = InputConsumer(model);
    if (want.size() == 1 && got.size() == 1 && want[0] != kUnknownDim && consumer != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", consumer->name, "' expects ",
                                                     want[0], " features, data has ", got[0]));
    }
    return absl::InvalidArgumentError(absl::StrCat("the model's input '", input.name,
                                                   "' expects rows of shape ", ShapeToString(want),
                                                   ", x has rows of shape ", ShapeToString(got)));
  }
  DType want_dtype = model.input_config().dtype;
  if (!IsFloatingPoint(want_dtype) && IsFloatingPoint(x.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's input '", input.name, "' is ", DTypeName(want_dtype), " but x is ",
        DTypeName(x.dtype), " (convert it with x.astype('", DTypeName(want_dtype), "'))"));
  }
  return absl::OkStatus();
}

absl::Status CheckY(const Shape& output, const Shape& y_row, LossKind loss) {
  std::string name(LossKindName(loss));
  switch (loss) {
    case LossKind::kSparseCategoricalCrossentropy: {
      if (output.empty())
        return absl::InvalidArgumentError(absl::StrCat(name, " needs an output with a class axis"));
      Shape labels(output.begin(), output.end() - 1);
      if (Matches(labels, y_row) || Matches(WithTrailingOne(labels), y_row))
        return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(
          name, " takes one integer class label per output row: y rows of shape ",
          ShapeToString(labels), " or ", ShapeToString(WithTrailingOne(labels)),
          " for the output's ", ShapeToString(output), "; y has rows of shape ",
          ShapeToString(y_row),
          Matches(output, y_row) ? " (one-hot labels go with categorical_crossentropy)" : ""));
    }
    case LossKind::kCategoricalCrossentropy:
      if (Matches(output, y_row)) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(
          name, " takes labels shaped like the output, ", ShapeToString(output),
          " per row; y has rows of shape ", ShapeToString(y_row),
          y_row.size() + 1 == output.size() ||
                  (!y_row.empty() && y_row.size() == output.size() && y_row.back() == 1)
              ? " (integer class labels go with sparse_categorical_crossentropy)"
              : ""));
    case LossKind::kBinaryCrossentropy:
    case LossKind::kMeanSquaredError:
    case LossKind::kMeanAbsoluteError:
    case LossKind::kHuber:
      // Keras squeezes a trailing 1 from whichever side has the higher rank.
      if (Matches(output, y_row) || Matches(WithTrailingOne(output), y_row) ||
          Matches(output, WithTrailingOne(y_row))) {
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(
          absl::StrCat(name, " takes labels shaped like the output, ", ShapeToString(output),
                       " per row; y has rows of shape ", ShapeToString(y_row)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckData(const ModelIr& model, const ArraySpec& x, const ArraySpec& y, LossKind loss,
                       const ModelLimits& limits) {
  if (x.shape.empty()) return absl::InvalidArgumentError("x is a scalar, not an array of rows");
  if (y.shape.empty()) return absl::InvalidArgumentError("y is a scalar, not an array of rows");
  if (x.shape[0] != y.shape[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("x has ", x.shape[0], " rows but y has ", y.shape[0]));
  }
  if (x.shape[0] < 1) return absl::InvalidArgumentError("x and y have no rows");
  COHORT_RETURN_IF_ERROR(CheckX(model, x));
  COHORT_ASSIGN_OR_RETURN(std::vector<Shape> shapes, InferShapes(model, Rows(x), limits));
  return CheckY(shapes.back(), Rows(y), loss);
}

absl::Status CheckLabelRange(const ModelIr& model, int64_t min_label, int64_t max_label) {
  const Shape& output = model.output().output_shape;
  int64_t classes = output.empty() ? kUnknownDim : output.back();
  if (min_label < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("labels go down to ", min_label, " but class labels start at 0"));
  }
  if (classes != kUnknownDim && max_label >= classes) {
    return absl::InvalidArgumentError(absl::StrCat("labels go up to ", max_label,
                                                   " but the output has ", classes,
                                                   " classes (layer '", model.output().name, "')"));
  }
  return absl::OkStatus();
}

absl::Status CheckTokenRange(const ModelIr& model, int64_t min_token, int64_t max_token) {
  for (const Node& node : model.nodes) {
    const auto* embedding = std::get_if<EmbeddingConfig>(&node.config);
    if (embedding == nullptr || node.inputs.empty() || node.inputs[0] != 0) continue;
    if (min_token < 0) {
      return absl::InvalidArgumentError(absl::StrCat("x holds the negative token id ", min_token,
                                                     ", which layer '", node.name,
                                                     "' (Embedding) cannot look up"));
    }
    if (max_token >= embedding->input_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("x holds token ids up to ", max_token, " but layer '", node.name,
                       "' (Embedding) has input_dim ", embedding->input_dim));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStepActivations(const ModelIr& model, const Shape& x_rows, int64_t rank_batch,
                                  int64_t max_elements, const ModelLimits& limits) {
  COHORT_ASSIGN_OR_RETURN(std::vector<Shape> shapes, InferShapes(model, x_rows, limits));
  std::optional<int64_t> total = 0;
  size_t largest = 0;
  int64_t largest_elements = -1;
  for (size_t i = 1; i < shapes.size(); ++i) {
    if (internal::HasUnknownDim(shapes[i])) continue;  // sizes the data does not fix
    std::optional<int64_t> n = internal::NumElements(shapes[i]);
    if (n && *n > largest_elements) {
      largest = i;
      largest_elements = *n;
    }
    if (n && total) n = internal::CheckedMul(*n, rank_batch);
    total = n && total ? internal::CheckedAdd(*total, *n) : std::nullopt;
  }
  if (total && *total <= max_elements) return absl::OkStatus();
  const Node& node = model.nodes[largest];
  return absl::ResourceExhaustedError(absl::StrCat(
      "a step of ", rank_batch, " samples per rank keeps ",
      total ? absl::StrCat(*total) : std::string("more than 2^63"),
      " activation elements, more than the limit of ", max_elements, " (the largest, layer '",
      node.name, "' (", LayerClassName(node.layer_class()), "), outputs ",
      ShapeToString(shapes[largest]), " per sample)"));
}

}  // namespace cohort::keras
