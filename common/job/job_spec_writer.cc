// JobSpecToYaml (job_spec_yaml.h).

#include <yaml-cpp/yaml.h>

#include <string>

#include "common/job/compile_yaml.h"
#include "common/job/job_spec_yaml.h"

namespace cohort::job {
namespace {

void EmitArray(YAML::Emitter& out, const char* key, const ArrayRef& array) {
  out << YAML::Key << key << YAML::Value;
  if (array.key.empty()) {
    out << YAML::DoubleQuoted << array.path;
    return;
  }
  out << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "path" << YAML::Value << YAML::DoubleQuoted << array.path;
  out << YAML::Key << "key" << YAML::Value << YAML::DoubleQuoted << array.key;
  out << YAML::EndMap;
}

}  // namespace

std::string JobSpecToYaml(const JobSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << spec.name;
  out << YAML::Key << "model" << YAML::Value << YAML::DoubleQuoted << spec.model.path;

  out << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  EmitArray(out, "x", spec.data.x);
  EmitArray(out, "y", spec.data.y);
  if (spec.data.validation_x.has_value()) EmitArray(out, "validation_x", *spec.data.validation_x);
  if (spec.data.validation_y.has_value()) EmitArray(out, "validation_y", *spec.data.validation_y);
  out << YAML::Key << "validation_split" << YAML::Value << FormatNumber(spec.data.validation_split);
  out << YAML::EndMap;

  out << YAML::Key << "fit" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "epochs" << YAML::Value << spec.fit.epochs;
  out << YAML::Key << "batch_size" << YAML::Value << spec.fit.batch_size;
  out << YAML::Key << "shuffle" << YAML::Value << spec.fit.shuffle;
  out << YAML::Key << "seed" << YAML::Value << spec.fit.seed;
  out << YAML::Key << "precision" << YAML::Value << std::string(PrecisionName(spec.fit.precision));
  out << YAML::EndMap;

  if (!IsEmpty(spec.compile)) {
    out << YAML::Key << "compile" << YAML::Value;
    EmitCompileSection(spec.compile, out);
  }

  out << YAML::Key << "resources" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "workers" << YAML::Value << spec.resources.workers;
  out << YAML::Key << "device" << YAML::Value << std::string(DeviceName(spec.resources.device));
  out << YAML::EndMap;

  out << YAML::Key << "checkpoint" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "every_epochs" << YAML::Value << spec.checkpoint.every_epochs;
  out << YAML::Key << "keep" << YAML::Value << spec.checkpoint.keep;
  out << YAML::EndMap;

  out << YAML::Key << "max_restarts" << YAML::Value << spec.max_restarts;
  out << YAML::Key << "priority" << YAML::Value << spec.priority;
  if (spec.trace) out << YAML::Key << "trace" << YAML::Value << true;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace cohort::job
