#include "proto/job_spec_convert.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/keras/compile_config.h"

namespace cohort::proto {
namespace {

// The proto enums list the keras kinds in the same order, after UNSPECIFIED.
v1::OptimizerKind ToProto(keras::OptimizerKind kind) {
  return static_cast<v1::OptimizerKind>(static_cast<int>(kind) + 1);
}
v1::LossKind ToProto(keras::LossKind kind) {
  return static_cast<v1::LossKind>(static_cast<int>(kind) + 1);
}

void ArrayToProto(const job::ArrayRef& from, v1::ArrayRef* to) {
  to->set_path(from.path);
  to->set_key(from.key);
}

void LearningRateToProto(const keras::LearningRate& rate, v1::OptimizerSpec* to) {
  switch (rate.kind) {
    case keras::LearningRate::Kind::kConstant:
      to->set_learning_rate(rate.initial);
      return;
    case keras::LearningRate::Kind::kExponentialDecay: {
      v1::ExponentialDecay* e = to->mutable_schedule()->mutable_exponential_decay();
      e->set_initial_learning_rate(rate.initial);
      e->set_decay_steps(rate.decay_steps);
      e->set_decay_rate(rate.decay_rate);
      e->set_staircase(rate.staircase);
      return;
    }
    case keras::LearningRate::Kind::kCosineDecay: {
      v1::CosineDecay* c = to->mutable_schedule()->mutable_cosine_decay();
      c->set_initial_learning_rate(rate.initial);
      c->set_decay_steps(rate.decay_steps);
      c->set_alpha(rate.alpha);
      return;
    }
  }
}

absl::StatusOr<std::string> Resolve(const ArtifactResolver& resolve, const std::string& id,
                                    const std::string& field) {
  if (!resolve) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": artifact '", id, "' cannot be used here"));
  }
  absl::StatusOr<std::string> path = resolve(id);
  if (!path.ok()) {
    return absl::Status(path.status().code(), absl::StrCat(field, ": ", path.status().message()));
  }
  return path;
}

absl::StatusOr<job::ArrayRef> ArrayFromProto(const v1::ArrayRef& from, const std::string& field,
                                             const ArtifactResolver& resolve) {
  job::ArrayRef to;
  to.key = from.key();
  if (from.source_case() == v1::ArrayRef::kArtifactId) {
    absl::StatusOr<std::string> path = Resolve(resolve, from.artifact_id(), field);
    if (!path.ok()) return path.status();
    to.path = *path;
  } else {
    to.path = from.path();
  }
  return to;
}

absl::StatusOr<job::ModelRef> ModelFromProto(const v1::JobSpec& spec,
                                             const ArtifactResolver& resolve) {
  job::ModelRef model;
  switch (spec.model_case()) {
    case v1::JobSpec::kKerasPath:
      model.path = spec.keras_path();
      return model;
    case v1::JobSpec::kConfigJsonPath:
      model.format = job::ModelFormat::kJson;
      model.path = spec.config_json_path();
      return model;
    case v1::JobSpec::kModelArtifactId: {
      absl::StatusOr<std::string> path = Resolve(resolve, spec.model_artifact_id(), "model");
      if (!path.ok()) return path.status();
      model.format = absl::EndsWith(*path, ".json") ? job::ModelFormat::kJson
                                                    : job::ModelFormat::kKeras;
      model.path = *path;
      return model;
    }
    case v1::JobSpec::kKerasFile:
    case v1::JobSpec::kConfigJson:
      return absl::InvalidArgumentError(
          "model: inline model bytes must be stored as an artifact before use");
    case v1::JobSpec::MODEL_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "model: not set (give a .keras file or the JSON of model.to_json())");
}

keras::LearningRate LearningRateFromProto(const v1::LearningRateSchedule& s) {
  keras::LearningRate rate;
  if (s.has_exponential_decay()) {
    const v1::ExponentialDecay& e = s.exponential_decay();
    rate.kind = keras::LearningRate::Kind::kExponentialDecay;
    rate.initial = e.initial_learning_rate();
    rate.decay_steps = e.decay_steps();
    rate.decay_rate = e.decay_rate();
    rate.staircase = e.staircase();
  } else {
    const v1::CosineDecay& c = s.cosine_decay();
    rate.kind = keras::LearningRate::Kind::kCosineDecay;
    rate.initial = c.initial_learning_rate();
    rate.decay_steps = c.decay_steps();
    rate.alpha = c.alpha();
  }
  return rate;
}

absl::StatusOr<job::OptimizerOverrides> OptimizerFromProto(const v1::OptimizerSpec& o) {
  job::OptimizerOverrides to;
  if (o.kind() != v1::OPTIMIZER_KIND_UNSPECIFIED) {
    if (!v1::OptimizerKind_IsValid(o.kind())) {
      return absl::InvalidArgumentError(absl::StrCat("compile.optimizer.kind: unknown value ",
                                                     static_cast<int>(o.kind())));
    }
    to.kind = static_cast<keras::OptimizerKind>(static_cast<int>(o.kind()) - 1);
  }
  if (o.schedule().schedule_case() != v1::LearningRateSchedule::SCHEDULE_NOT_SET) {
    to.learning_rate = LearningRateFromProto(o.schedule());
  } else if (o.has_learning_rate()) {
    to.learning_rate = keras::LearningRate::Constant(o.learning_rate());
  }
  if (o.has_momentum()) to.momentum = o.momentum();
  if (o.has_nesterov()) to.nesterov = o.nesterov();
  if (o.has_beta_1()) to.beta_1 = o.beta_1();
  if (o.has_beta_2()) to.beta_2 = o.beta_2();
  if (o.has_epsilon()) to.epsilon = o.epsilon();
  if (o.has_weight_decay()) to.weight_decay = o.weight_decay();
  if (o.has_rho()) to.rho = o.rho();
  if (o.has_initial_accumulator_value()) to.initial_accumulator_value = o.initial_accumulator_value();
  return to;
}

absl::StatusOr<job::CompileOverrides> CompileFromProto(const v1::CompileSpec& c) {
  job::CompileOverrides to;
  absl::StatusOr<job::OptimizerOverrides> optimizer = OptimizerFromProto(c.optimizer());
  if (!optimizer.ok()) return optimizer.status();
  to.optimizer = *optimizer;
  const v1::LossSpec& loss = c.loss();
  if (loss.kind() != v1::LOSS_KIND_UNSPECIFIED) {
    if (!v1::LossKind_IsValid(loss.kind())) {
      return absl::InvalidArgumentError(
          absl::StrCat("compile.loss.kind: unknown value ", static_cast<int>(loss.kind())));
    }
    to.loss = keras::KerasDefaultLoss(static_cast<keras::LossKind>(static_cast<int>(loss.kind()) - 1));
    to.loss->from_logits = loss.from_logits();
    if (loss.has_delta()) to.loss->delta = loss.delta();
  } else if (loss.from_logits() || loss.has_delta()) {
    return absl::InvalidArgumentError(
        "compile.loss.kind: must be set when from_logits or delta is");
  }
  for (int i = 0; i < c.metrics_size(); ++i) {
    std::optional<keras::MetricConfig> metric = keras::MetricFromName(c.metrics(i));
    if (!metric) {
      return absl::InvalidArgumentError(absl::StrCat("compile.metrics[", i, "]: unknown metric '",
                                                     c.metrics(i), "' (supported: ",
                                                     keras::SupportedMetricNames(), ")"));
    }
    to.metrics.push_back(*metric);
  }
  return to;
}

}  // namespace

v1::JobSpec JobSpecToProto(const job::JobSpec& spec) {
  v1::JobSpec to;
  to.set_name(spec.name);
  if (spec.model.format == job::ModelFormat::kKeras) {
    to.set_keras_path(spec.model.path);
  } else {
    to.set_config_json_path(spec.model.path);
  }
  v1::DataSpec* data = to.mutable_data();
  ArrayToProto(spec.data.x, data->mutable_x());
  ArrayToProto(spec.data.y, data->mutable_y());
  if (spec.data.validation_x) ArrayToProto(*spec.data.validation_x, data->mutable_validation_x());
  if (spec.data.validation_y) ArrayToProto(*spec.data.validation_y, data->mutable_validation_y());
  data->set_validation_split(spec.data.validation_split);

  v1::FitSpec* fit = to.mutable_fit();
  fit->set_epochs(spec.fit.epochs);
  fit->set_batch_size(spec.fit.batch_size);
  fit->set_shuffle(spec.fit.shuffle);
  fit->set_seed(spec.fit.seed);
  fit->set_precision(spec.fit.precision == job::Precision::kMixedBfloat16
                         ? v1::PRECISION_MIXED_BFLOAT16
                         : v1::PRECISION_FLOAT32);

  const job::OptimizerOverrides& o = spec.compile.optimizer;
  v1::OptimizerSpec* optimizer = to.mutable_compile()->mutable_optimizer();
  if (o.kind) optimizer->set_kind(ToProto(*o.kind));
  if (o.learning_rate) LearningRateToProto(*o.learning_rate, optimizer);
  if (o.momentum) optimizer->set_momentum(*o.momentum);
  if (o.nesterov) optimizer->set_nesterov(*o.nesterov);
  if (o.beta_1) optimizer->set_beta_1(*o.beta_1);
  if (o.beta_2) optimizer->set_beta_2(*o.beta_2);
  if (o.epsilon) optimizer->set_epsilon(*o.epsilon);
  if (o.weight_decay) optimizer->set_weight_decay(*o.weight_decay);
  if (o.rho) optimizer->set_rho(*o.rho);
  if (o.initial_accumulator_value) {
    optimizer->set_initial_accumulator_value(*o.initial_accumulator_value);
  }
  if (spec.compile.loss) {
    v1::LossSpec* loss = to.mutable_compile()->mutable_loss();
    loss->set_kind(ToProto(spec.compile.loss->kind));
    loss->set_from_logits(spec.compile.loss->from_logits);
    if (spec.compile.loss->kind == keras::LossKind::kHuber) loss->set_delta(spec.compile.loss->delta);
  }
  for (const keras::MetricConfig& m : spec.compile.metrics) to.mutable_compile()->add_metrics(m.name);

  to.mutable_resources()->set_workers(spec.resources.workers);
  to.mutable_resources()->set_device(spec.resources.device == job::Device::kCuda
                                         ? v1::DEVICE_TYPE_CUDA
                                         : v1::DEVICE_TYPE_CPU);
  to.mutable_checkpoint()->set_every_epochs(spec.checkpoint.every_epochs);
  to.mutable_checkpoint()->set_keep(spec.checkpoint.keep);
  to.set_priority(spec.priority);
  to.set_max_restarts(spec.max_restarts);
  to.set_trace(spec.trace);
  return to;
}

absl::StatusOr<job::JobSpec> JobSpecFromProto(const v1::JobSpec& spec,
                                              const ArtifactResolver& resolve,
                                              const std::string& default_name) {
  job::JobSpec to;
  to.name = spec.name().empty() ? default_name : spec.name();
  absl::StatusOr<job::ModelRef> model = ModelFromProto(spec, resolve);
  if (!model.ok()) return model.status();
  to.model = *model;

  const v1::DataSpec& data = spec.data();
  if (!data.has_x()) return absl::InvalidArgumentError("data.x: required");
  if (!data.has_y()) return absl::InvalidArgumentError("data.y: required");
  absl::StatusOr<job::ArrayRef> x = ArrayFromProto(data.x(), "data.x", resolve);
  if (!x.ok()) return x.status();
  to.data.x = *x;
  absl::StatusOr<job::ArrayRef> y = ArrayFromProto(data.y(), "data.y", resolve);
  if (!y.ok()) return y.status();
  to.data.y = *y;
  if (data.has_validation_x()) {
    absl::StatusOr<job::ArrayRef> v = ArrayFromProto(data.validation_x(), "data.validation_x", resolve);
    if (!v.ok()) return v.status();
    to.data.validation_x = *v;
  }
  if (data.has_validation_y()) {
    absl::StatusOr<job::ArrayRef> v = ArrayFromProto(data.validation_y(), "data.validation_y", resolve);
    if (!v.ok()) return v.status();
    to.data.validation_y = *v;
  }
  to.data.validation_split = data.validation_split();

  const v1::FitSpec& fit = spec.fit();
  if (fit.epochs() != 0) to.fit.epochs = fit.epochs();
  if (fit.batch_size() != 0) to.fit.batch_size = fit.batch_size();
  if (fit.has_shuffle()) to.fit.shuffle = fit.shuffle();
  to.fit.seed = fit.seed();
  switch (fit.precision()) {
    case v1::PRECISION_UNSPECIFIED:
    case v1::PRECISION_FLOAT32:
      break;
    case v1::PRECISION_MIXED_BFLOAT16:
      to.fit.precision = job::Precision::kMixedBfloat16;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("fit.precision: unknown value ", static_cast<int>(fit.precision())));
  }

  absl::StatusOr<job::CompileOverrides> compile = CompileFromProto(spec.compile());
  if (!compile.ok()) return compile.status();
  to.compile = *compile;

  if (spec.resources().workers() != 0) to.resources.workers = spec.resources().workers();
  switch (spec.resources().device()) {
    case v1::DEVICE_TYPE_UNSPECIFIED:
    case v1::DEVICE_TYPE_CPU:
      break;
    case v1::DEVICE_TYPE_CUDA:
      to.resources.device = job::Device::kCuda;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("resources.device: unknown value ",
                                                     static_cast<int>(spec.resources().device())));
  }
  if (spec.checkpoint().has_every_epochs()) to.checkpoint.every_epochs = spec.checkpoint().every_epochs();
  if (spec.checkpoint().keep() != 0) to.checkpoint.keep = spec.checkpoint().keep();
  to.priority = spec.priority();
  if (spec.has_max_restarts()) to.max_restarts = spec.max_restarts();
  to.trace = spec.trace();
  if (absl::Status s = job::ValidateJobSpec(to); !s.ok()) return s;
  return to;
}

}  // namespace cohort::proto
