#include "worker/trainer/dataset.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/keras/shape.h"
#include "worker/trainer/cpu_kernels.h"

namespace cohort::trainer {
namespace {

using keras::LossKind;

std::vector<int64_t> RowShape(const npy::NpyArray& a) {
  return std::vector<int64_t>(a.shape().begin() + 1, a.shape().end());
}

bool ShapeMatches(const std::vector<int64_t>& data, const keras::Shape& model) {
  if (data.size() != model.size()) return false;
  for (size_t i = 0; i < data.size(); ++i) {
    if (model[i] != keras::kUnknownDim && model[i] != data[i]) return false;
  }
  return true;
}

int64_t Product(const std::vector<int64_t>& s) {
  int64_t p = 1;
  for (int64_t d : s) p *= d;
  return p;
}

absl::StatusOr<ArrayPair> OpenPair(const job::ArrayRef& x, const job::ArrayRef& y) {
  ArrayPair pair;
  absl::StatusOr<std::unique_ptr<npy::NpyArray>> xa = npy::OpenArray(x.path, x.key);
  if (!xa.ok()) return xa.status();
  absl::StatusOr<std::unique_ptr<npy::NpyArray>> ya = npy::OpenArray(y.path, y.key);
  if (!ya.ok()) return ya.status();
  if ((*xa)->rows() != (*ya)->rows()) {
    return absl::InvalidArgumentError(absl::StrCat((*xa)->source(), " has ", (*xa)->rows(),
                                                   " rows but ", (*ya)->source(), " has ",
                                                   (*ya)->rows()));
  }
  pair.x = std::move(*xa);
  pair.y = std::move(*ya);
  return pair;
}

// y must fit the output and the loss: labels for sparse crossentropy, else the
// output's shape (a trailing 1 may be left out, as Keras allows).
absl::Status CheckLabels(const npy::NpyArray& y, const keras::Node& output,
                         const keras::LossConfig& loss) {
  std::vector<int64_t> row = RowShape(y);
  const keras::Shape& out = output.output_shape;
  std::string what = absl::StrCat(y.source(), " rows have shape ", keras::ShapeToString(row));
  if (loss.kind == LossKind::kSparseCategoricalCrossentropy) {
    keras::Shape labels(out.begin(), out.end() - 1);
    keras::Shape with_one = labels;
    with_one.push_back(1);
    if (!ShapeMatches(row, labels) && !ShapeMatches(row, with_one)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " but sparse_categorical_crossentropy on layer '", output.name, "' output ",
          keras::ShapeToString(out), " needs labels of shape ", keras::ShapeToString(labels)));
    }
    int64_t classes = out.back();
    std::vector<int64_t> all(y.rows());
    for (int64_t i = 0; i < y.rows(); ++i) all[i] = i;
    std::vector<int64_t> values(y.rows() * y.row_elements());
    if (absl::Status s = y.GatherRows(all, npy::DType::kInt64, values.data()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(s.message(), " (labels must be integers)"));
    }
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] < 0 || (classes != keras::kUnknownDim && values[i] >= classes)) {
        return absl::InvalidArgumentError(absl::StrCat(
            y.source(), ": label ", values[i], " in row ", i / y.row_elements(),
            " is outside [0, ", classes, "): the output layer '", output.name, "' has ", classes,
            " classes"));
      }
    }
    return absl::OkStatus();
  }
  bool same = ShapeMatches(row, out);
  bool same_elements = !out.empty() && out.back() != keras::kUnknownDim &&
                       Product(row) == Product(std::vector<int64_t>(out.begin(), out.end()));
  if (!same && !(loss.kind != LossKind::kCategoricalCrossentropy && same_elements)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " but the output of layer '",
                                                   output.name, "' has shape ",
                                                   keras::ShapeToString(out)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Dataset>> Dataset::Open(const job::DataSpec& spec,
                                                       const keras::ModelIr& ir,
                                                       const keras::LossConfig& loss) {
  std::unique_ptr<Dataset> d(new Dataset());
  absl::StatusOr<ArrayPair> train = OpenPair(spec.x, spec.y);
  if (!train.ok()) return train.status();
  d->train_ = std::move(*train);
  const npy::NpyArray& x = *d->train_.x;
  const keras::InputLayerConfig& input = ir.input_config();
  d->x_row_shape_ = RowShape(x);
  if (!ShapeMatches(d->x_row_shape_, input.shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        x.source(), " rows have shape ", keras::ShapeToString(d->x_row_shape_), " but the model '",
        ir.name, "' takes inputs of shape ", keras::ShapeToString(input.shape)));
  }
  d->x_dtype_ = keras::IsFloatingPoint(input.dtype) ? npy::DType::kFloat32 : npy::DType::kInt64;
  d->y_dtype_ = loss.kind == LossKind::kSparseCategoricalCrossentropy ? npy::DType::kInt64
                                                                      : npy::DType::kFloat32;
  if (absl::Status s = CheckLabels(*d->train_.y, ir.output(), loss); !s.ok()) return s;
  d->y_row_shape_ = RowShape(*d->train_.y);

  d->train_rows_ = x.rows();
  if (spec.validation_x) {
    absl::StatusOr<ArrayPair> val = OpenPair(*spec.validation_x, *spec.validation_y);
    if (!val.ok()) return val.status();
    if (RowShape(*val->x) != d->x_row_shape_ || RowShape(*val->y) != d->y_row_shape_) {
      return absl::InvalidArgumentError(absl::StrCat(
          val->x->source(), " / ", val->y->source(), ": validation rows are shaped ",
          keras::ShapeToString(RowShape(*val->x)), " / ", keras::ShapeToString(RowShape(*val->y)),
          ", training rows ", keras::ShapeToString(d->x_row_shape_), " / ",
          keras::ShapeToString(d->y_row_shape_)));
    }
    if (absl::Status s = CheckLabels(*val->y, ir.output(), loss); !s.ok()) return s;
    d->validation_rows_ = val->x->rows();
    d->validation_ = std::move(*val);
  } else if (spec.validation_split > 0) {
    // Keras: the last rows, before shuffling; split_at = floor(rows * (1 - split))
    // (keras/src/trainers/data_adapters/array_slicing.py, train_validation_split).
    int64_t split_at = static_cast<int64_t>(std::floor(x.rows() * (1.0 - spec.validation_split)));
    d->validation_rows_ = x.rows() - split_at;
    d->train_rows_ = split_at;
    if (d->train_rows_ == 0 || d->validation_rows_ == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data.validation_split: ", spec.validation_split, " of ", x.rows(), " rows leaves ",
          d->train_rows_, " to train on and ", d->validation_rows_, " to validate on"));
    }
  }
  return d;
}

namespace {

// Below this many bytes a thread's share of a gather is not worth its start.
constexpr size_t kThreadedGatherMinBytes = size_t{64} << 10;

// a's rows `rows` into `out` (as many rows, of `dtype`), split across the calling
// thread's OpenMP threads when `threaded`; the error is that of the first bad row.
absl::Status GatherRows(const npy::NpyArray& a, std::span<const int64_t> rows, npy::DType dtype,
                        bool threaded, torch::Tensor& out) {
  if (!threaded || rows.empty()) return a.GatherRows(rows, dtype, out.data_ptr());
  const size_t row_bytes = out.nbytes() / rows.size();
  std::mutex mu;
  size_t first_bad = rows.size();
  absl::Status error;
  ParallelSlices(rows.size(), 1, std::max<size_t>(1, kThreadedGatherMinBytes / row_bytes),
                 [&](size_t begin, size_t end) {
                   absl::Status s = a.GatherRows(rows.subspan(begin, end - begin), dtype,
                                                 static_cast<char*>(out.data_ptr()) + begin * row_bytes);
                   if (s.ok()) return;
                   std::lock_guard<std::mutex> lock(mu);
                   if (begin < first_bad) {
                     first_bad = begin;
                     error = std::move(s);
                   }
                 });
  return error;
}

}  // namespace

absl::Status Dataset::Gather(const ArrayPair& arrays, std::span<const int64_t> rows,
                             torch::Device device, bool check, bool threaded, torch::Tensor* x,
                             torch::Tensor* y) const {
  auto shape = [&](const std::vector<int64_t>& row) {
    std::vector<int64_t> s{static_cast<int64_t>(rows.size())};
    s.insert(s.end(), row.begin(), row.end());
    return s;
  };
  auto dtype = [](npy::DType t) { return t == npy::DType::kInt64 ? torch::kLong : torch::kFloat32; };
  torch::Tensor xb = torch::empty(shape(x_row_shape_), dtype(x_dtype_));
  torch::Tensor yb = torch::empty(shape(y_row_shape_), dtype(y_dtype_));
  if (absl::Status s = GatherRows(*arrays.x, rows, x_dtype_, threaded, xb); !s.ok()) return s;
  if (absl::Status s = GatherRows(*arrays.y, rows, y_dtype_, threaded, yb); !s.ok()) return s;
  if (check) {
    for (auto [t, a] : {std::pair{&xb, arrays.x.get()}, std::pair{&yb, arrays.y.get()}}) {
      if (!t->is_floating_point()) continue;
      torch::Tensor bad = torch::isfinite(t->reshape({t->size(0), -1})).all(1).logical_not();
      if (bad.any().item<bool>()) {
        int64_t i = bad.nonzero()[0][0].item<int64_t>();
        return absl::InvalidArgumentError(absl::StrCat(a->source(), ": row ", rows[i],
                                                       " holds NaN or infinity"));
      }
    }
  }
  *x = device.is_cpu() ? std::move(xb) : xb.to(device);
  *y = device.is_cpu() ? std::move(yb) : yb.to(device);
  return absl::OkStatus();
}

absl::Status Dataset::GatherTrain(std::span<const int64_t> rows, torch::Device device, bool check,
                                  bool threaded, torch::Tensor* x, torch::Tensor* y) const {
  return Gather(train_, rows, device, check, threaded, x, y);
}

absl::Status Dataset::GatherValidation(int64_t begin, int64_t end, torch::Device device,
                                       torch::Tensor* x, torch::Tensor* y) const {
  std::vector<int64_t> rows(end - begin);
  int64_t offset = validation_.x ? 0 : train_rows_;
  for (int64_t i = begin; i < end; ++i) rows[i - begin] = offset + i;
  return Gather(validation_.x ? validation_ : train_, rows, device, /*check=*/true,
                /*threaded=*/true, x, y);
}

}  // namespace cohort::trainer
