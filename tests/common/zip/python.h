#pragma once

// Runs a helper script with the project virtualenv's Python (real zipfile, NumPy,
// Keras): the judge of the formats these tests check.

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/support/process.h"

namespace cohort::testing {

// Runs `script` (a path under the source tree) with `args`; fails the test unless it
// exits 0. Returns its stdout.
inline std::string RunPython(const std::string& script, const std::vector<std::string>& args,
                             absl::Duration timeout = absl::Seconds(120)) {
  std::vector<std::string> argv = {COHORT_VENV_PYTHON, std::string(COHORT_SOURCE_DIR) + "/" + script};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult result = RunCommand(argv, timeout, {{"KERAS_BACKEND", "jax"}});
  INFO(result.output);
  REQUIRE(result.status.code == 0);
  return result.out;
}

}  // namespace cohort::testing
