#pragma once

// The `compile` section of a job spec's YAML, read and written. Internal to
// common/job (job_spec_yaml.h is the public face); may throw YAML::Exception, which
// ParseJobSpec catches.

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "common/job/compile_overrides.h"
#include "common/job/field_error.h"

namespace cohort::job {

// Reads the value of the `compile` key into `out`, recording lines. Ranges and
// option-vs-kind checks are left to ValidateCompileOverrides.
absl::Status ParseCompileSection(const YAML::Node& node, FieldLines& lines, CompileOverrides& out);

// True when `overrides` sets nothing (the section can be left out).
bool IsEmpty(const CompileOverrides& overrides);

// Writes the section's map (without the `compile` key) in the form ParseCompileSection
// reads back to an equal value.
void EmitCompileSection(const CompileOverrides& overrides, YAML::Emitter& out);

}  // namespace cohort::job
