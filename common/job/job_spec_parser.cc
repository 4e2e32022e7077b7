// ParseJobSpec and LoadJobSpec (job_spec_yaml.h): the YAML adapter. Everything that
// touches yaml-cpp runs inside ParseJobSpec's try block.

#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/job/compile_yaml.h"
#include "common/job/job_spec_yaml.h"
#include "common/status_macros.h"
#include "common/job/yaml_fields.h"
#include "common/names.h"

namespace cohort::job {
namespace {

namespace fs = std::filesystem;

constexpr absl::string_view kPositive = "a positive integer";
constexpr absl::string_view kNonNegative = "an integer >= 0";

class Parser {
 public:
  explicit Parser(fs::path base_dir) : base_dir_(std::move(base_dir)) {}

  absl::StatusOr<JobSpec> Parse(const YAML::Node& root, absl::string_view default_name) {
    COHORT_ASSIGN_OR_RETURN(YamlMap top,
                         YamlMap::Read(root, "",
                                       {"name", "model", "data", "fit", "compile", "resources",
                                        "checkpoint", "max_restarts", "priority", "trace"},
                                       lines_));
    JobSpec spec;
    if (std::optional<YAML::Node> name = top.Get("name")) {
      COHORT_ASSIGN_OR_RETURN(spec.name, ReadString(*name, "name", lines_));
    } else {
      COHORT_RETURN_IF_ERROR(
          CheckName(default_name, "name (not set; the default is the file's stem)"));
      spec.name = std::string(default_name);
    }
    std::optional<YAML::Node> model = top.Get("model");
    if (!model.has_value()) return top.Missing("model", lines_);
    COHORT_RETURN_IF_ERROR(ParseModel(*model, spec.model));
    std::optional<YAML::Node> data = top.Get("data");
    if (!data.has_value()) return top.Missing("data", lines_);
    COHORT_RETURN_IF_ERROR(ParseData(*data, spec.data));
    if (std::optional<YAML::Node> fit = top.Get("fit"))
      COHORT_RETURN_IF_ERROR(ParseFit(*fit, spec.fit));
    if (std::optional<YAML::Node> compile = top.Get("compile")) {
      COHORT_RETURN_IF_ERROR(ParseCompileSection(*compile, lines_, spec.compile));
    }
    if (std::optional<YAML::Node> resources = top.Get("resources")) {
      COHORT_RETURN_IF_ERROR(ParseResources(*resources, spec.resources));
    }
    if (std::optional<YAML::Node> checkpoint = top.Get("checkpoint")) {
      COHORT_RETURN_IF_ERROR(ParseCheckpoint(*checkpoint, spec.checkpoint));
    }
    if (std::optional<YAML::Node> n = top.Get("max_restarts")) {
      COHORT_ASSIGN_OR_RETURN(spec.max_restarts,
                           ReadInteger<int32_t>(*n, "max_restarts", lines_, kNonNegative));
    }
    if (std::optional<YAML::Node> n = top.Get("priority")) {
      COHORT_ASSIGN_OR_RETURN(spec.priority,
                           ReadInteger<int32_t>(*n, "priority", lines_, "an integer"));
    }
    if (std::optional<YAML::Node> n = top.Get("trace")) {
      COHORT_ASSIGN_OR_RETURN(spec.trace, ReadBool(*n, "trace", lines_));
    }
    COHORT_RETURN_IF_ERROR(ValidateJobSpec(spec, lines_));
    return spec;
  }

 private:
  // An absolute, normalized path: relative ones are taken from the YAML's directory.
  absl::StatusOr<std::string> ReadPath(const YAML::Node& node, absl::string_view field) {
    COHORT_ASSIGN_OR_RETURN(std::string text, ReadString(node, field, lines_));
    if (text[0] == '~') {
      return FieldError(lines_, field,
                        absl::StrCat("'~' is not expanded; write the full path, got '", text, "'"));
    }
    fs::path path(text);
    if (path.is_relative()) path = base_dir_ / path;
    return path.lexically_normal().string();
  }

  absl::Status ParseModel(const YAML::Node& node, ModelRef& out) {
    COHORT_ASSIGN_OR_RETURN(out.path, ReadPath(node, "model"));
    if (absl::EndsWithIgnoreCase(out.path, ".keras")) {
      out.format = ModelFormat::kKeras;
    } else if (absl::EndsWithIgnoreCase(out.path, ".json")) {
      out.format = ModelFormat::kJson;
    } else {
      return FieldError(lines_, "model",
                        absl::StrCat("must be a .keras file or the .json of model.to_json(), got '",
                                     node.Scalar(), "'"));
    }
    return absl::OkStatus();
  }

  // A path, or {path: FILE.npz, key: ARRAY}.
  absl::Status ParseArray(const YAML::Node& node, const std::string& field, ArrayRef& out) {
    if (!node.IsMap()) {
      COHORT_ASSIGN_OR_RETURN(out.path, ReadPath(node, field));
      return absl::OkStatus();
    }
    COHORT_ASSIGN_OR_RETURN(YamlMap map, YamlMap::Read(node, field, {"path", "key"}, lines_));
    std::optional<YAML::Node> path = map.Get("path");
    if (!path.has_value()) return map.Missing("path", lines_);
    COHORT_ASSIGN_OR_RETURN(out.path, ReadPath(*path, map.Field("path")));
    if (std::optional<YAML::Node> key = map.Get("key")) {
      COHORT_ASSIGN_OR_RETURN(out.key, ReadString(*key, map.Field("key"), lines_));
    }
    return absl::OkStatus();
  }

  absl::Status ParseData(const YAML::Node& node, DataSpec& out) {
    COHORT_ASSIGN_OR_RETURN(
        YamlMap map,
        YamlMap::Read(node, "data", {"x", "y", "validation_x", "validation_y", "validation_split"},
                      lines_));
    for (absl::string_view required : {"x", "y"}) {
      if (!map.Get(required).has_value()) return map.Missing(required, lines_);
    }
    COHORT_RETURN_IF_ERROR(ParseArray(*map.Get("x"), "data.x", out.x));
    COHORT_RETURN_IF_ERROR(ParseArray(*map.Get("y"), "data.y", out.y));
    if (std::optional<YAML::Node> v = map.Get("validation_x")) {
      COHORT_RETURN_IF_ERROR(ParseArray(*v, "data.validation_x", out.validation_x.emplace()));
    }
    if (std::optional<YAML::Node> v = map.Get("validation_y")) {
      COHORT_RETURN_IF_ERROR(ParseArray(*v, "data.validation_y", out.validation_y.emplace()));
    }
    if (std::optional<YAML::Node> v = map.Get("validation_split")) {
      COHORT_ASSIGN_OR_RETURN(out.validation_split,
                           ReadNumber(*v, "data.validation_split", lines_, "in [0, 1)"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseFit(const YAML::Node& node, FitSpec& out) {
    COHORT_ASSIGN_OR_RETURN(
        YamlMap map,
        YamlMap::Read(node, "fit", {"epochs", "batch_size", "shuffle", "seed", "precision"},
                      lines_));
    if (std::optional<YAML::Node> n = map.Get("epochs")) {
      COHORT_ASSIGN_OR_RETURN(out.epochs, ReadInteger<int32_t>(*n, "fit.epochs", lines_, kPositive));
    }
    if (std::optional<YAML::Node> n = map.Get("batch_size")) {
      COHORT_ASSIGN_OR_RETURN(out.batch_size,
                           ReadInteger<int64_t>(*n, "fit.batch_size", lines_, kPositive));
    }
    if (std::optional<YAML::Node> n = map.Get("shuffle")) {
      COHORT_ASSIGN_OR_RETURN(out.shuffle, ReadBool(*n, "fit.shuffle", lines_));
    }
    if (std::optional<YAML::Node> n = map.Get("seed")) {
      COHORT_ASSIGN_OR_RETURN(out.seed, ReadInteger<uint64_t>(*n, "fit.seed", lines_, kNonNegative));
    }
    if (std::optional<YAML::Node> n = map.Get("precision")) {
      COHORT_ASSIGN_OR_RETURN(std::string name, ReadString(*n, "fit.precision", lines_));
      absl::StatusOr<Precision> precision = PrecisionFromName(name);
      if (!precision.ok()) return FieldError(lines_, "fit.precision", precision.status().message());
      out.precision = *precision;
    }
    return absl::OkStatus();
  }

  absl::Status ParseResources(const YAML::Node& node, ResourcesSpec& out) {
    COHORT_ASSIGN_OR_RETURN(YamlMap map,
                         YamlMap::Read(node, "resources", {"workers", "device"}, lines_));
    if (std::optional<YAML::Node> n = map.Get("workers")) {
      COHORT_ASSIGN_OR_RETURN(out.workers,
                           ReadInteger<int32_t>(*n, "resources.workers", lines_, kPositive));
    }
    if (std::optional<YAML::Node> n = map.Get("device")) {
      COHORT_ASSIGN_OR_RETURN(std::string device, ReadString(*n, "resources.device", lines_));
      if (device == "cpu") {
        out.device = Device::kCpu;
      } else if (device == "cuda") {
        out.device = Device::kCuda;
      } else {
        return FieldError(lines_, "resources.device",
                          absl::StrCat("'", device, "' is not supported; supported: cpu, cuda"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseCheckpoint(const YAML::Node& node, CheckpointSpec& out) {
    COHORT_ASSIGN_OR_RETURN(YamlMap map,
                         YamlMap::Read(node, "checkpoint", {"every_epochs", "keep"}, lines_));
    if (std::optional<YAML::Node> n = map.Get("every_epochs")) {
      COHORT_ASSIGN_OR_RETURN(out.every_epochs, ReadInteger<int32_t>(*n, "checkpoint.every_epochs",
                                                                  lines_, kNonNegative));
    }
    if (std::optional<YAML::Node> n = map.Get("keep")) {
      COHORT_ASSIGN_OR_RETURN(out.keep,
                           ReadInteger<int32_t>(*n, "checkpoint.keep", lines_, kPositive));
    }
    return absl::OkStatus();
  }

  fs::path base_dir_;
  FieldLines lines_;
};

absl::StatusOr<JobSpec> ParseUnguarded(absl::string_view yaml, const std::string& base_dir,
                                       absl::string_view default_name) {
  std::error_code error;
  fs::path base = fs::absolute(base_dir.empty() ? fs::path(".") : fs::path(base_dir), error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec: cannot resolve the directory '", base_dir, "': ", error.message()));
  }
  const std::string text(yaml);
  if (std::optional<int> line = SecondDocumentLine(text)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job spec: a second YAML document starts at line ", *line, "; a job spec is one"));
  }
  const YAML::Node root = YAML::Load(text);
  if (root.IsNull()) {
    return absl::InvalidArgumentError(
        "job spec: the file is empty; it needs at least model: and data: (see docs/job-spec.md)");
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec: must be a map of fields (name, model, data, fit, ...), got ",
                     DescribeValue(root), " (line ", root.Mark().line + 1, ")"));
  }
  return Parser(base.lexically_normal()).Parse(root, default_name);
}

}  // namespace

absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view yaml, const std::string& base_dir,
                                     absl::string_view default_name) {
  if (yaml.size() > kMaxJobSpecBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec: too long (more than ", kMaxJobSpecBytes, " bytes)"));
  }
  try {
    return ParseUnguarded(yaml, base_dir, default_name);
  } catch (const YAML::Exception& e) {
    const std::string where = e.mark.is_null() ? "" : absl::StrCat(" (line ", e.mark.line + 1, ")");
    return absl::InvalidArgumentError(absl::StrCat("job spec: invalid YAML: ", e.msg, where));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("job spec: ", e.what()));
  }
}

absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::error_code error;
  if (!file || fs::is_directory(path, error)) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot read the job spec"));
  }
  std::string text(kMaxJobSpecBytes + 1, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (file.bad()) return absl::NotFoundError(absl::StrCat(path, ": cannot read the job spec"));
  text.resize(static_cast<size_t>(file.gcount()));
  const fs::path file_path(path);
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(text, file_path.parent_path().string(), file_path.stem().string());
  if (!spec.ok()) {
    return absl::Status(spec.status().code(), absl::StrCat(path, ": ", spec.status().message()));
  }
  return spec;
}

}  // namespace cohort::job
