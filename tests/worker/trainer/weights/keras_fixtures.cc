#include "tests/worker/trainer/weights/keras_fixtures.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"

namespace cohort::testing {
namespace {

const std::string& MadeOnce(const std::string& command) {
  static std::map<std::string, std::unique_ptr<TempDir>> dirs;
  std::unique_ptr<TempDir>& dir = dirs[command];
  if (dir == nullptr) {
    auto made = std::make_unique<TempDir>();
    CommandResult result = RunKerasFixtureScript(command, made->path());
    INFO(result.output);
    REQUIRE(result.status.code == 0);
    dir = std::move(made);
  }
  return dir->path();
}

template <typename T>
std::vector<T> FromLittleEndian(const std::string& bytes) {
  REQUIRE(bytes.size() % sizeof(T) == 0);
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), bytes.size());  // x86-64 is little-endian
  return values;
}

std::vector<ExpectedVariable> LoadVariables(const std::string& dir, const nlohmann::json& list) {
  std::vector<ExpectedVariable> variables;
  for (const nlohmann::json& entry : list) {
    ExpectedVariable variable;
    variable.shape = entry.at("shape").get<std::vector<int64_t>>();
    variable.dtype = entry.at("dtype").get<std::string>();
    std::string bytes = ReadFile(dir + "/" + entry.at("file").get<std::string>());
    if (variable.dtype == "float32") {
      variable.floats = FromLittleEndian<float>(bytes);
    } else if (variable.dtype == "int32") {
      for (int32_t v : FromLittleEndian<int32_t>(bytes)) variable.ints.push_back(v);
    } else {
      REQUIRE(variable.dtype == "int64");
      variable.ints = FromLittleEndian<int64_t>(bytes);
    }
    variables.push_back(std::move(variable));
  }
  return variables;
}

}  // namespace

CommandResult RunKerasFixtureScript(const std::string& command, const std::string& dir) {
  const std::string script =
      std::string(COHORT_SOURCE_DIR) + "/tests/worker/trainer/weights/keras_weights_fixture.py";
  return RunCommand({COHORT_VENV_PYTHON, script, command, dir}, absl::Seconds(300),
                    {{"KERAS_BACKEND", "jax"}, {"JAX_PLATFORMS", "cpu"}});
}

const std::string& KerasModelsDir() { return MadeOnce("make"); }
const std::string& BadWeightsDir() { return MadeOnce("bad"); }

ExpectedModel LoadExpectedModel(const std::string& dir, const std::string& model) {
  std::string text = ReadFile(dir + "/" + model + ".json");
  REQUIRE(!text.empty());
  nlohmann::json json = nlohmann::json::parse(text);
  ExpectedModel expected;
  expected.model_name = json.at("model_name").get<std::string>();
  for (const nlohmann::json& layer : json.at("layers")) {
    expected.layers.push_back({layer.at("class_name").get<std::string>(),
                               layer.at("name").get<std::string>(),
                               LoadVariables(dir, layer.at("variables"))});
  }
  expected.optimizer_name = json.at("optimizer").at("name").get<std::string>();
  expected.optimizer = LoadVariables(dir, json.at("optimizer").at("variables"));
  return expected;
}

void CheckSameWeights(const trainer::KerasWeights& a, const trainer::KerasWeights& b) {
  for (const auto& [list_a, list_b] : {std::pair{&a.groups, &b.groups},
                                       std::pair{&a.optimizer, &b.optimizer}}) {
    REQUIRE(list_a->size() == list_b->size());
    for (size_t g = 0; g < list_a->size(); ++g) {
      const trainer::KerasVarGroup& ga = (*list_a)[g];
      const trainer::KerasVarGroup& gb = (*list_b)[g];
      INFO(ga.path);
      CHECK(ga.path == gb.path);
      CHECK(ga.name == gb.name);
      REQUIRE(ga.variables.size() == gb.variables.size());
      for (size_t i = 0; i < ga.variables.size(); ++i) {
        CHECK(ga.variables[i].shape == gb.variables[i].shape);
        CHECK(ga.variables[i].dtype == gb.variables[i].dtype);
        CHECK(ga.variables[i].values == gb.variables[i].values);
        CHECK(ga.variables[i].int_values == gb.variables[i].int_values);
      }
    }
  }
}

}  // namespace cohort::testing
