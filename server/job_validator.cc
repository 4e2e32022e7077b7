#include "server/job_validator.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/job/compile_overrides.h"
#include "common/keras/data_check.h"
#include "common/keras/model_config.h"
#include "common/npy/npy_array.h"
#include "common/zip/zip_reader.h"
#include "proto/job_spec_convert.h"

namespace cohort::server {
namespace {

absl::Status Field(absl::string_view field, const absl::Status& s,
                   absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  return absl::Status(code, absl::StrCat(field, ": ", s.message()));
}

keras::DType ToKeras(npy::DType d) {
  switch (d) {
    case npy::DType::kFloat32: return keras::DType::kFloat32;
    case npy::DType::kFloat64: return keras::DType::kFloat64;
    case npy::DType::kInt32: return keras::DType::kInt32;
    case npy::DType::kInt64: return keras::DType::kInt64;
    case npy::DType::kUInt8: return keras::DType::kUint8;
    case npy::DType::kBool: return keras::DType::kBool;
  }
  return keras::DType::kFloat32;
}

keras::ArraySpec SpecOf(const npy::NpyArray& a) { return {a.shape(), ToKeras(a.dtype())}; }

absl::StatusOr<std::unique_ptr<npy::NpyArray>> Open(const job::ArrayRef& ref,
                                                    absl::string_view field) {
  absl::StatusOr<std::unique_ptr<npy::NpyArray>> a = npy::OpenArray(ref.path, ref.key);
  if (!a.ok()) return Field(field, a.status());
  return a;
}

// The smallest and largest value of an array read as integers, a slice of rows at a
// time (the file is mapped: only the pages read are loaded).
absl::StatusOr<std::pair<int64_t, int64_t>> IntRange(const npy::NpyArray& a,
                                                     absl::string_view field,
                                                     absl::string_view what) {
  const int64_t per_row = std::max<int64_t>(1, a.row_elements());
  const int64_t rows_per_slice = std::max<int64_t>(1, (int64_t{1} << 20) / per_row);
  std::vector<int64_t> indices;
  std::vector<int64_t> values;
  int64_t lo = std::numeric_limits<int64_t>::max();
  int64_t hi = std::numeric_limits<int64_t>::min();
  for (int64_t first = 0; first < a.rows(); first += rows_per_slice) {
    int64_t n = std::min(rows_per_slice, a.rows() - first);
    indices.resize(n);
    for (int64_t i = 0; i < n; ++i) indices[i] = first + i;
    values.resize(n * per_row);
    if (absl::Status s = a.GatherRows(indices, npy::DType::kInt64, values.data()); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", s.message(), " (", what, " must be integers)"));
    }
    for (int64_t v : values) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  return std::make_pair(lo, hi);
}

bool HasEmbeddingInput(const keras::ModelIr& ir) {
  for (const keras::Node& node : ir.nodes) {
    if (std::holds_alternative<keras::EmbeddingConfig>(node.config) && !node.inputs.empty() &&
        node.inputs[0] == 0) {
      return true;
    }
  }
  return false;
}

// x and y (or the validation pair) against the model and the loss.
absl::Status CheckPair(const keras::ModelIr& ir, const keras::LossConfig& loss,
                       const npy::NpyArray& x, const npy::NpyArray& y, const std::string& xf,
                       const std::string& yf, const JobLimits& limits) {
  absl::Status s = keras::CheckData(ir, SpecOf(x), SpecOf(y), loss.kind, limits.model);
  if (!s.ok()) {
    std::string field = xf;
    if (absl::StartsWith(s.message(), keras::LossKindName(loss.kind)) ||
        absl::StartsWith(s.message(), "y ")) {
      field = yf;
    } else if (absl::StartsWith(s.message(), "x has ")) {
      field = absl::StrCat(xf, ", ", yf);
    }
    return Field(field, s);
  }
  if (loss.kind == keras::LossKind::kSparseCategoricalCrossentropy) {
    absl::StatusOr<std::pair<int64_t, int64_t>> range = IntRange(y, yf, "labels");
    if (!range.ok()) return range.status();
    if (absl::Status r = keras::CheckLabelRange(ir, range->first, range->second); !r.ok()) {
      return Field(yf, r);
    }
  }
  if (HasEmbeddingInput(ir)) {
    absl::StatusOr<std::pair<int64_t, int64_t>> range = IntRange(x, xf, "token ids");
    if (!range.ok()) return range.status();
    if (absl::Status r = keras::CheckTokenRange(ir, range->first, range->second); !r.ok()) {
      return Field(xf, r);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckData(const keras::ModelIr& ir, const keras::LossConfig& loss,
                       const job::JobSpec& job, const JobLimits& limits) {
  const job::DataSpec& data = job.data;
  absl::StatusOr<std::unique_ptr<npy::NpyArray>> x = Open(data.x, "data.x");
  if (!x.ok()) return x.status();
  absl::StatusOr<std::unique_ptr<npy::NpyArray>> y = Open(data.y, "data.y");
  if (!y.ok()) return y.status();
  if (absl::Status s = CheckPair(ir, loss, **x, **y, "data.x", "data.y", limits); !s.ok()) {
    return s;
  }
  const keras::Shape x_rows((*x)->shape().begin() + 1, (*x)->shape().end());
  const int64_t rank_batch = job.fit.batch_size / std::max(1, job.resources.workers);
  if (absl::Status s = keras::CheckStepActivations(ir, x_rows, rank_batch,
                                                   limits.max_step_activation_elements,
                                                   limits.model);
      !s.ok()) {
    return Field("fit.batch_size", s, s.code());
  }
  if (data.validation_x && data.validation_y) {
    absl::StatusOr<std::unique_ptr<npy::NpyArray>> vx = Open(*data.validation_x, "data.validation_x");
    if (!vx.ok()) return vx.status();
    absl::StatusOr<std::unique_ptr<npy::NpyArray>> vy = Open(*data.validation_y, "data.validation_y");
    if (!vy.ok()) return vy.status();
    if (absl::Status s = CheckPair(ir, loss, **vx, **vy, "data.validation_x", "data.validation_y",
                                   limits);
        !s.ok()) {
      return s;
    }
  } else if (data.validation_split > 0) {
    // Keras: the last rows, before shuffling; split_at = floor(rows * (1 - split)).
    int64_t rows = (*x)->rows();
    int64_t train = static_cast<int64_t>(std::floor(rows * (1.0 - data.validation_split)));
    if (train == 0 || train == rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("data.validation_split: ", data.validation_split, " of ", rows,
                       " rows leaves ", train, " to train on and ", rows - train,
                       " to validate on"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, int64_t max_bytes,
                                          absl::string_view field) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(field, ": cannot read ", path));
  std::streamoff size = in.tellg();
  if (size > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(field, ": ", path, " is ", size,
                                                     " bytes, more than --max-model-bytes (",
                                                     max_bytes, ")"));
  }
  in.seekg(0);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), size);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(field, ": cannot read ", path));
  return bytes;
}

absl::StatusOr<std::string> ConfigFromKeras(absl::StatusOr<std::unique_ptr<zip::ZipReader>> zip) {
  if (!zip.ok()) return Field("model", zip.status());
  absl::StatusOr<std::string> config = (*zip)->Read("config.json");
  if (!config.ok()) return Field("model", config.status());
  return config;
}

// job::OptimizerOverrides holding what `o` trains with, options of its kind only.
job::OptimizerOverrides Resolved(const keras::OptimizerConfig& o) {
  job::OptimizerOverrides to;
  to.kind = o.kind;
  if (!o.learning_rate.warmup_target) to.learning_rate = o.learning_rate;
  to.weight_decay = o.weight_decay;
  switch (o.kind) {
    case keras::OptimizerKind::kSgd:
      to.momentum = o.momentum;
      to.nesterov = o.nesterov;
      break;
    case keras::OptimizerKind::kAdam:
    case keras::OptimizerKind::kAdamW:
      to.beta_1 = o.beta_1;
      to.beta_2 = o.beta_2;
      to.epsilon = o.epsilon;
      break;
    case keras::OptimizerKind::kRmsprop:
      to.rho = o.rho;
      to.momentum = o.momentum;
      to.epsilon = o.epsilon;
      break;
    case keras::OptimizerKind::kAdagrad:
      to.initial_accumulator_value = o.initial_accumulator_value;
      to.epsilon = o.epsilon;
      break;
  }
  return to;
}

// Every path the request names (not the artifact store's own): absolute and inside
// the allowed roots.
absl::Status CheckPaths(const v1::JobSpec& spec, const PathRoots& roots) {
  if (spec.model_case() == v1::JobSpec::kKerasPath) {
    if (absl::Status s = roots.Check(spec.keras_path(), "model"); !s.ok()) return s;
  }
  if (spec.model_case() == v1::JobSpec::kConfigJsonPath) {
    if (absl::Status s = roots.Check(spec.config_json_path(), "model"); !s.ok()) return s;
  }
  const v1::DataSpec& d = spec.data();
  std::vector<std::pair<const v1::ArrayRef*, const char*>> arrays = {{&d.x(), "data.x"},
                                                                     {&d.y(), "data.y"}};
  if (d.has_validation_x()) arrays.push_back({&d.validation_x(), "data.validation_x"});
  if (d.has_validation_y()) arrays.push_back({&d.validation_y(), "data.validation_y"});
  for (const auto& [array, field] : arrays) {
    if (array->source_case() != v1::ArrayRef::kPath) continue;
    if (absl::Status s = roots.Check(array->path(), field); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Puts the request's artifact references back where the typed spec has paths.
void KeepReferences(const v1::JobSpec& from, v1::JobSpec* to) {
  if (from.model_case() == v1::JobSpec::kModelArtifactId) {
    to->set_model_artifact_id(from.model_artifact_id());
  }
  auto keep = [](const v1::ArrayRef& a, v1::ArrayRef* b) {
    if (a.source_case() == v1::ArrayRef::kArtifactId) b->set_artifact_id(a.artifact_id());
  };
  keep(from.data().x(), to->mutable_data()->mutable_x());
  keep(from.data().y(), to->mutable_data()->mutable_y());
  if (from.data().has_validation_x()) {
    keep(from.data().validation_x(), to->mutable_data()->mutable_validation_x());
  }
  if (from.data().has_validation_y()) {
    keep(from.data().validation_y(), to->mutable_data()->mutable_validation_y());
  }
}

}  // namespace

absl::StatusOr<std::string> JobValidator::ModelConfigJson(const v1::JobSpec& spec,
                                                          const job::JobSpec& typed) const {
  const int64_t max = artifacts_->options().max_model_bytes;
  switch (spec.model_case()) {
    case v1::JobSpec::kKerasFile:
      return ConfigFromKeras(zip::ZipReader::FromBuffer(spec.keras_file(), "model.keras"));
    case v1::JobSpec::kConfigJson:
      return spec.config_json();
    default:
      break;
  }
  if (typed.model.format == job::ModelFormat::kKeras) {
    return ConfigFromKeras(zip::ZipReader::Open(typed.model.path));
  }
  return ReadSmallFile(typed.model.path, max, "model");
}

absl::Status JobValidator::CheckResources(const job::JobSpec& typed) const {
  std::vector<WorkerCapacity> cluster = cluster_ ? cluster_() : std::vector<WorkerCapacity>{};
  if (cluster.empty()) return absl::OkStatus();  // nobody registered yet: wait for them
  QueuedJob q;
  q.ranks = typed.resources.workers;
  q.kind = typed.resources.device == job::Device::kCuda ? SlotKind::kGpu : SlotKind::kCpu;
  if (CanEverFit(q, cluster)) return absl::OkStatus();
  int64_t total = 0;
  for (const WorkerCapacity& w : cluster) {
    total += q.kind == SlotKind::kGpu ? w.total_gpus : w.total_cpu_slots;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "resources.workers: ", q.ranks, " ranks on ", job::DeviceName(typed.resources.device),
      " can never run here: the ", cluster.size(), " registered workers offer ", total,
      q.kind == SlotKind::kGpu ? " GPUs" : " CPU slots", " in all"));
}

absl::StatusOr<ValidatedJob> JobValidator::Validate(const v1::JobSpec& spec) const {
  ValidatedJob out;
  out.stored = spec;
  const int64_t max_model = artifacts_->options().max_model_bytes;
  // An inline model is checked from memory; it is known by the id it will be stored as.
  v1::JobSpec for_typing = spec;
  if (spec.model_case() == v1::JobSpec::kKerasFile || spec.model_case() == v1::JobSpec::kConfigJson) {
    const bool keras = spec.model_case() == v1::JobSpec::kKerasFile;
    const std::string& bytes = keras ? spec.keras_file() : spec.config_json();
    if (static_cast<int64_t>(bytes.size()) > max_model) {
      return absl::ResourceExhaustedError(absl::StrCat(
          keras ? "keras_file" : "config_json", ": the model is ", bytes.size(),
          " bytes, more than --max-model-bytes (", max_model, ")"));
    }
    out.inline_extension = keras ? "keras" : "json";
    out.inline_model = bytes;
    std::string id = ArtifactStore::UploadIdFor(out.inline_extension, bytes);
    for_typing.set_model_artifact_id(id);
    out.stored.set_model_artifact_id(id);
  }
  std::string inline_id = out.inline_model.empty() ? "" : for_typing.model_artifact_id();
  proto::ArtifactResolver resolve =
      [this, &inline_id](const std::string& id) -> absl::StatusOr<std::string> {
    if (!inline_id.empty() && id == inline_id) return artifacts_->UploadPathFor(id);
    absl::StatusOr<std::string> path = artifacts_->UploadPath(id);
    if (path.status().code() == absl::StatusCode::kNotFound) {
      return absl::InvalidArgumentError(path.status().message());
    }
    return path;
  };
  absl::StatusOr<job::JobSpec> typed = proto::JobSpecFromProto(for_typing, resolve);
  if (!typed.ok()) {
    return absl::Status(typed.status().code() == absl::StatusCode::kOk
                            ? absl::StatusCode::kInvalidArgument
                            : typed.status().code(),
                        typed.status().message());
  }
  out.stored.set_name(typed->name);
  if (absl::Status s = CheckPaths(spec, limits_.data_roots); !s.ok()) return s;

  absl::StatusOr<std::string> json = ModelConfigJson(spec, *typed);
  if (!json.ok()) return json.status();
  absl::StatusOr<keras::ModelIr> ir = keras::ParseModelConfig(*json, limits_.model);
  if (!ir.ok()) return Field("model", ir.status());
  absl::StatusOr<keras::CompileConfig> compile = job::ResolveCompile(ir->compile, typed->compile);
  if (!compile.ok()) return compile.status();
  if (absl::Status s = CheckData(*ir, *compile->loss, *typed, limits_); !s.ok()) return s;
  if (absl::Status s = CheckResources(*typed); !s.ok()) return s;

  job::JobSpec resolved = *typed;
  resolved.compile.optimizer = Resolved(compile->optimizer);
  resolved.compile.loss = compile->loss;
  resolved.compile.metrics = compile->metrics;
  out.resolved = proto::JobSpecToProto(resolved);
  KeepReferences(for_typing, &out.resolved);
  // dry_run stores nothing: an inline model has no id to name yet.
  if (!out.inline_model.empty()) out.resolved.clear_model();
  return out;
}

}  // namespace cohort::server
