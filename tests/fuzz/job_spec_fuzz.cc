// libFuzzer entry point for the job spec's YAML parser (common/job/job_spec_yaml.h).
//
// Checks, for any input: ParseJobSpec returns (never throws, crashes or hangs) with
// either a spec or INVALID_ARGUMENT; a spec it returns prints (JobSpecToYaml) to YAML
// that parses back to an equal spec; and ResolveCompile on it returns.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "common/job/job_spec_yaml.h"

namespace {

void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "job_spec_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using cohort::job::JobSpec;
  const absl::string_view yaml(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<JobSpec> spec = cohort::job::ParseJobSpec(yaml, "/fuzz/jobs", "fuzz-job");
  if (!spec.ok()) {
    if (spec.status().code() != absl::StatusCode::kInvalidArgument) {
      Fail("an error other than INVALID_ARGUMENT", spec.status().ToString());
    }
    return 0;
  }
  const std::string printed = cohort::job::JobSpecToYaml(*spec);
  absl::StatusOr<JobSpec> again = cohort::job::ParseJobSpec(printed, "/elsewhere", "other");
  if (!again.ok())
    Fail("the printed spec does not parse", again.status().ToString() + "\n" + printed);
  if (!(*again == *spec)) {
    Fail("the printed spec parses to a different spec", printed + "\n" + JobSpecToYaml(*again));
  }
  (void)cohort::job::ResolveCompile(std::nullopt, spec->compile);
  return 0;
}
