#include "client/submit_spec.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/job/job_spec_yaml.h"
#include "common/names.h"
#include "common/status_macros.h"

namespace cohort::client {
namespace {

absl::Status FlagError(absl::string_view flag, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", problem));
}

absl::StatusOr<int64_t> ParseInt(const std::string& text, absl::string_view flag, int64_t min,
                                 int64_t max) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
    std::string what;
    if (min == std::numeric_limits<int32_t>::min()) {
      what = "a 32-bit integer";
    } else if (max == std::numeric_limits<int32_t>::max() ||
               max == std::numeric_limits<int64_t>::max()) {
      what = absl::StrCat("an integer >= ", min);
    } else {
      what = absl::StrCat("an integer in [", min, ", ", max, "]");
    }
    return FlagError(flag, absl::StrCat("must be ", what, ", got '", text, "'"));
  }
  return value;
}

absl::StatusOr<double> ParseDouble(const std::string& text, absl::string_view flag) {
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    return FlagError(flag, absl::StrCat("must be a number, got '", text, "'"));
  }
  return value;
}

// A job name from a file stem: invalid characters become '-', at most 63 of them.
std::string NameFromStem(const std::string& path) {
  std::string stem = std::filesystem::path(path).stem().string();
  std::string out;
  for (char c : stem) {
    const bool ok = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                    c == '_';
    out += ok ? c : '-';
  }
  while (!out.empty() && !absl::ascii_isalnum(static_cast<unsigned char>(out.front()))) {
    out.erase(out.begin());
  }
  if (out.size() > 63) out.resize(63);
  return out.empty() ? "job" : out;
}

absl::Status ApplyArray(const std::optional<std::string>& path,
                        const std::optional<std::string>& key, absl::string_view path_flag,
                        const std::string& cwd, job::ArrayRef& array) {
  if (path) {
    if (path->empty()) return FlagError(path_flag, "must not be empty");
    array.path = AbsolutePath(*path, cwd);
    array.key.clear();
  }
  if (key) array.key = *key;
  return absl::OkStatus();
}

absl::Status ApplyData(const SubmitFlags& f, const std::string& cwd, job::DataSpec& data) {
  COHORT_RETURN_IF_ERROR(ApplyArray(f.x, f.x_key, "--x", cwd, data.x));
  // `--x data.npz --key x_train --y-key y_train`: y comes from the same .npz.
  std::optional<std::string> y = f.y;
  if (!y && f.y_key && data.y.path.empty() && absl::EndsWithIgnoreCase(data.x.path, ".npz")) {
    y = data.x.path;
  }
  COHORT_RETURN_IF_ERROR(ApplyArray(y, f.y_key, "--y", cwd, data.y));
  if (f.validation_x || f.validation_x_key) {
    job::ArrayRef v = data.validation_x.value_or(job::ArrayRef{});
    COHORT_RETURN_IF_ERROR(ApplyArray(f.validation_x, f.validation_x_key, "--validation-x", cwd, v));
    data.validation_x = v;
  }
  std::optional<std::string> validation_y = f.validation_y;
  if (!validation_y && f.validation_y_key && !data.validation_y && data.validation_x &&
      absl::EndsWithIgnoreCase(data.validation_x->path, ".npz")) {
    validation_y = data.validation_x->path;
  }
  if (validation_y || f.validation_y_key) {
    job::ArrayRef v = data.validation_y.value_or(job::ArrayRef{});
    COHORT_RETURN_IF_ERROR(ApplyArray(validation_y, f.validation_y_key, "--validation-y", cwd, v));
    data.validation_y = v;
  }
  if (f.validation_split) {
    COHORT_ASSIGN_OR_RETURN(double split, ParseDouble(*f.validation_split, "--validation-split"));
    if (!(split >= 0 && split < 1)) {
      return FlagError("--validation-split",
                       absl::StrCat("must be in [0, 1), got '", *f.validation_split, "'"));
    }
    if (split > 0 && (f.validation_x || f.validation_y)) {
      return FlagError("--validation-split", "cannot be combined with --validation-x/--validation-y");
    }
    data.validation_split = split;
    if (split > 0) {
      data.validation_x.reset();  // the flag replaces the YAML's validation data
      data.validation_y.reset();
    }
  }
  if ((f.validation_x || f.validation_y) && data.validation_split > 0) data.validation_split = 0;
  if (data.validation_x.has_value() != data.validation_y.has_value()) {
    return data.validation_x ? FlagError("--validation-y", "required with --validation-x")
                             : FlagError("--validation-x", "required with --validation-y");
  }
  return absl::OkStatus();
}

absl::Status ApplyFit(const SubmitFlags& f, job::FitSpec& fit) {
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  if (f.epochs) {
    COHORT_ASSIGN_OR_RETURN(int64_t epochs, ParseInt(*f.epochs, "--epochs", 1, kInt32Max));
    fit.epochs = static_cast<int32_t>(epochs);
  }
  if (f.batch_size) {
    COHORT_ASSIGN_OR_RETURN(fit.batch_size, ParseInt(*f.batch_size, "--batch-size", 1,
                                              std::numeric_limits<int64_t>::max()));
  }
  if (f.seed) {
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(*f.seed, &seed) || absl::StartsWith(*f.seed, "-")) {
      return FlagError("--seed", absl::StrCat("must be an integer in [0, 2^64), got '", *f.seed, "'"));
    }
    fit.seed = seed;
  }
  if (f.shuffle) fit.shuffle = *f.shuffle;
  if (f.precision) {
    absl::StatusOr<job::Precision> precision = job::PrecisionFromName(*f.precision);
    if (!precision.ok()) return FlagError("--precision", precision.status().message());
    fit.precision = *precision;
  }
  return absl::OkStatus();
}

absl::Status ApplyCompile(const SubmitFlags& f, job::CompileOverrides& compile) {
  if (f.optimizer) {
    std::optional<keras::OptimizerKind> kind = keras::OptimizerKindFromName(*f.optimizer);
    if (!kind) {
      return FlagError("--optimizer", absl::StrCat("unknown optimizer '", *f.optimizer,
                                                   "' (supported: ", keras::SupportedOptimizerNames(),
                                                   ")"));
    }
    // As compile(optimizer="adam"): Keras' defaults for the kind, then the flags.
    compile.optimizer = job::OptimizerOverrides{};
    compile.optimizer.kind = kind;
  }
  if (f.learning_rate) {
    COHORT_ASSIGN_OR_RETURN(double rate, ParseDouble(*f.learning_rate, "--learning-rate"));
    if (!(rate > 0)) {
      return FlagError("--learning-rate", absl::StrCat("must be > 0, got '", *f.learning_rate, "'"));
    }
    compile.optimizer.learning_rate = keras::LearningRate::Constant(rate);
  }
  if (f.loss) {
    std::optional<keras::LossKind> kind = keras::LossKindFromName(*f.loss);
    if (!kind) {
      return FlagError("--loss", absl::StrCat("unknown loss '", *f.loss, "' (supported: ",
                                              keras::SupportedLossNames(), ")"));
    }
    compile.loss = keras::KerasDefaultLoss(*kind);
  }
  if (f.from_logits) {
    if (!compile.loss) return FlagError("--from-logits", "needs --loss (the loss it applies to)");
    const keras::LossKind kind = compile.loss->kind;
    const bool crossentropy = kind == keras::LossKind::kSparseCategoricalCrossentropy ||
                              kind == keras::LossKind::kCategoricalCrossentropy ||
                              kind == keras::LossKind::kBinaryCrossentropy;
    if (!crossentropy && *f.from_logits) {
      return FlagError("--from-logits", absl::StrCat("not an option of ",
                                                     keras::LossKindName(kind)));
    }
    compile.loss->from_logits = *f.from_logits;
  }
  if (f.metrics) {
    compile.metrics.clear();
    for (const std::string& item : *f.metrics) {
      for (absl::string_view piece : absl::StrSplit(item, ',', absl::SkipWhitespace())) {
        const std::string name(absl::StripAsciiWhitespace(piece));
        std::optional<keras::MetricConfig> metric = keras::MetricFromName(name);
        if (!metric) {
          return FlagError("--metrics", absl::StrCat("unknown metric '", name, "' (supported: ",
                                                     keras::SupportedMetricNames(), ")"));
        }
        compile.metrics.push_back(*metric);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyResources(const SubmitFlags& f, job::JobSpec& spec) {
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
  if (f.workers) {
    COHORT_ASSIGN_OR_RETURN(int64_t workers, ParseInt(*f.workers, "--workers", 1, kInt32Max));
    spec.resources.workers = static_cast<int32_t>(workers);
  }
  if (f.device) {
    const std::string device = absl::AsciiStrToLower(*f.device);
    if (device == "cpu") {
      spec.resources.device = job::Device::kCpu;
    } else if (device == "cuda" || device == "gpu") {
      spec.resources.device = job::Device::kCuda;
    } else {
      return FlagError("--device", absl::StrCat("must be cpu or cuda, got '", *f.device, "'"));
    }
  }
  if (f.priority) {
    COHORT_ASSIGN_OR_RETURN(int64_t priority, ParseInt(*f.priority, "--priority", kInt32Min, kInt32Max));
    spec.priority = static_cast<int32_t>(priority);
  }
  if (f.max_restarts) {
    COHORT_ASSIGN_OR_RETURN(int64_t restarts, ParseInt(*f.max_restarts, "--max-restarts", 0, kInt32Max));
    spec.max_restarts = static_cast<int32_t>(restarts);
  }
  if (f.checkpoint_every) {
    COHORT_ASSIGN_OR_RETURN(int64_t every,
                     ParseInt(*f.checkpoint_every, "--checkpoint-every", 0, kInt32Max));
    spec.checkpoint.every_epochs = static_cast<int32_t>(every);
  }
  if (f.trace) spec.trace = *f.trace;
  if (f.checkpoint_keep) {
    COHORT_ASSIGN_OR_RETURN(int64_t keep, ParseInt(*f.checkpoint_keep, "--checkpoint-keep", 1, kInt32Max));
    spec.checkpoint.keep = static_cast<int32_t>(keep);
  }
  return absl::OkStatus();
}

bool IsYaml(const std::string& path) {
  return absl::EndsWithIgnoreCase(path, ".yaml") || absl::EndsWithIgnoreCase(path, ".yml");
}

}  // namespace

std::string AbsolutePath(const std::string& path, const std::string& cwd) {
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::path(cwd) / p;
  std::string out = p.lexically_normal().string();
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

absl::StatusOr<job::JobSpec> ResolveSubmitSpec(const SubmitFlags& flags, const std::string& cwd) {
  job::JobSpec spec;
  if (flags.target.empty()) {
    return FlagError("JOB", "give a JOB.yaml, or a MODEL.keras with --x and --y");
  }
  const bool yaml = IsYaml(flags.target);
  if (yaml) {
    COHORT_ASSIGN_OR_RETURN(spec, job::LoadJobSpec(AbsolutePath(flags.target, cwd)));
  } else {
    if (absl::EndsWithIgnoreCase(flags.target, ".keras")) {
      spec.model.format = job::ModelFormat::kKeras;
    } else if (absl::EndsWithIgnoreCase(flags.target, ".json")) {
      spec.model.format = job::ModelFormat::kJson;
    } else {
      return FlagError("JOB", absl::StrCat("expected a JOB.yaml, a MODEL.keras or the MODEL.json "
                                           "of model.to_json(), got '",
                                           flags.target, "'"));
    }
    spec.model.path = AbsolutePath(flags.target, cwd);
    spec.name = NameFromStem(flags.target);
    if (!flags.x) return FlagError("--x", "required with a model file (the training inputs)");
    if (!flags.y && !flags.y_key) {
      return FlagError("--y", "required with a model file (the training targets)");
    }
  }
  if (flags.name) {
    COHORT_RETURN_IF_ERROR(CheckName(*flags.name, "--name"));
    spec.name = *flags.name;
  }
  COHORT_RETURN_IF_ERROR(ApplyData(flags, cwd, spec.data));
  COHORT_RETURN_IF_ERROR(ApplyFit(flags, spec.fit));
  COHORT_RETURN_IF_ERROR(ApplyCompile(flags, spec.compile));
  COHORT_RETURN_IF_ERROR(ApplyResources(flags, spec));
  COHORT_RETURN_IF_ERROR(job::ValidateJobSpec(spec));
  return spec;
}

}  // namespace cohort::client
