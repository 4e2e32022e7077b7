#include "tests/common/keras/keras_fixtures.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <memory>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::keras::testing {

const std::string& KerasModels(const std::string& mode) {
  static std::map<std::string, std::unique_ptr<cohort::testing::TempDir>> dirs;
  auto& dir = dirs[mode];
  if (!dir) {
    dir = std::make_unique<cohort::testing::TempDir>();
    std::string script = std::string(COHORT_SOURCE_DIR) + "/tests/common/keras/make_models.py";
    cohort::testing::CommandResult result = cohort::testing::RunCommand(
        {COHORT_VENV_PYTHON, script, mode, dir->path()}, absl::Seconds(600),
        {{"KERAS_BACKEND", "jax"}, {"JAX_PLATFORMS", "cpu"}});
    if (result.status.code != 0) {
      dir.reset();
      FAIL("make_models.py " << mode << " failed:\n" << result.output);
    }
  }
  return dir->path();
}

std::string ReadFixture(const std::string& dir, const std::string& name) {
  std::string path = dir + "/" + name;
  INFO(path);
  REQUIRE(std::filesystem::exists(path));
  return cohort::testing::ReadFile(path);
}

nlohmann::json ReadJsonFixture(const std::string& dir, const std::string& name) {
  return nlohmann::json::parse(ReadFixture(dir, name));
}

}  // namespace cohort::keras::testing
