#include "tests/common/metrics/promtool.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {

std::string PromtoolPath() {
  for (const char* p : {"/usr/bin/promtool", "/usr/local/bin/promtool"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

std::string PromtoolProblems(const std::string& text) {
  TempDir tmp;
  WriteFile(tmp.File("metrics.txt"), text);
  // promtool reads the metrics on stdin.
  CommandResult r = RunCommand({"/bin/sh", "-c", absl::StrCat(PromtoolPath(), " check metrics < ",
                                                              tmp.File("metrics.txt"))});
  if (r.status.code == 0 && r.output.empty()) return "";
  return absl::StrCat("promtool exit ", r.status.code, ": ", r.output);
}

}  // namespace cohort::testing
