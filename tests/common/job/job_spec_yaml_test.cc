// JobSpecToYaml: the resolved spec as YAML; ParseJobSpec reads it back to an equal
// spec, and PyYAML reads the same values from it.

#include "common/job/job_spec_yaml.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::job {
namespace {

JobSpec Parse(const std::string& yaml, const std::string& base_dir = "/jobs") {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, base_dir, "default-name");
  INFO(yaml);
  INFO(spec.status().ToString());
  REQUIRE(spec.ok());
  return *spec;
}

// The spec, written and read back from another directory (paths are absolute).
JobSpec RoundTrip(const JobSpec& spec) { return Parse(JobSpecToYaml(spec), "/elsewhere"); }

TEST_CASE("the minimal spec is printed with every default", "[job]") {
  JobSpec spec = Parse("model: m.keras\ndata: {x: x.npy, y: {path: d.npz, key: y}}\n");
  CHECK(JobSpecToYaml(spec) == R"(name: "default-name"
model: "/jobs/m.keras"
data:
  x: "/jobs/x.npy"
  y: {path: "/jobs/d.npz", key: "y"}
  validation_split: 0
fit:
  epochs: 1
  batch_size: 32
  shuffle: true
  seed: 0
  precision: float32
resources:
  workers: 1
  device: cpu
checkpoint:
  every_epochs: 1
  keep: 2
max_restarts: 3
priority: 0
)");
  CHECK(RoundTrip(spec) == spec);
}

TEST_CASE("specs survive the round trip through YAML", "[job]") {
  const std::string head = "model: m.json\ndata: {x: x.npy, y: y.npy}\n";
  const std::string specs[] = {
      R"(
name: digits-cnn
model: model.keras
data:
  x: {path: data.npz, key: x_train}
  y: {path: data.npz, key: y_train}
  validation_x: x_test.npy
  validation_y: y_test.npy
fit: {epochs: 10, batch_size: 128, shuffle: false, seed: 18446744073709551615, precision: mixed_bfloat16}
compile:
  optimizer: {name: sgd, learning_rate: 0.01, momentum: 0.9, nesterov: true, weight_decay: 1e-5}
  loss: {name: binary_crossentropy, from_logits: true}
  metrics: [accuracy, mae, MeanSquaredError, acc]
resources: {workers: 2, device: cuda}
checkpoint: {every_epochs: 0, keep: 1}
max_restarts: 0
priority: -2147483648
)",
      "model: m.json\ndata: {x: x.npy, y: y.npy, validation_split: 0.1}\n",
      head + "compile: {optimizer: adam}\n",
      head + "compile: {learning_rate: 0.001}\n",
      head + "compile: {loss: mse}\n",
      head + "compile: {loss: {name: huber, delta: 0.3}}\n",
      head + "compile: {metrics: [sparse_categorical_accuracy]}\n",
      head + "compile: {optimizer: {epsilon: 1e-9, weight_decay: 0.1}}\n",
      head + "compile: {optimizer: {name: adamw, beta_1: 0.85, beta_2: 0.9999, epsilon: 1e-8}}\n",
      head + "compile: {optimizer: {name: rmsprop, rho: 0.95, momentum: 0.1}}\n",
      head + "compile: {optimizer: {name: adagrad, initial_accumulator_value: 0.01}}\n",
      head +
          "compile:\n  optimizer:\n    name: adam\n    schedule: {name: exponential_decay, "
          "initial_learning_rate: 0.1, decay_steps: 100, decay_rate: 0.96, staircase: true}\n",
      head +
          "compile:\n  optimizer:\n    schedule: {name: cosine_decay, "
          "initial_learning_rate: 0.3, decay_steps: 7, alpha: 0.1}\n",
      head +
          "fit: {epochs: 2147483647, batch_size: 9223372036854775806}\n"
          "resources: {workers: 2}\n",
  };
  for (const std::string& yaml : specs) {
    JobSpec spec = Parse(yaml);
    INFO(JobSpecToYaml(spec));
    CHECK(RoundTrip(spec) == spec);
    CHECK(JobSpecToYaml(RoundTrip(spec)) == JobSpecToYaml(spec));
  }
}

TEST_CASE("numbers are printed exactly", "[job]") {
  JobSpec spec = Parse("model: m.keras\ndata: {x: x.npy, y: y.npy, validation_split: 0.1}\n");
  for (double value : {0.1, 1.0 / 3.0, 1e-300, 0.30000000000000004, 5e-324, 0.9999999999999999,
                       1e-5, 1.5e-10, 0.123456789012345}) {
    spec.data.validation_split = value;
    INFO(JobSpecToYaml(spec));
    CHECK(RoundTrip(spec).data.validation_split == value);
  }
}

TEST_CASE("PyYAML reads the printed spec, odd paths included", "[job]") {
  testing::TempDir dir;
  JobSpec spec = Parse(
      "name: odd\n"
      "model: 'dir with spaces/m: #1.keras'\n"
      "data:\n"
      "  x: \"quote\\\" and \\\\ backslash.npy\"\n"
      "  y: {path: 'ünïcødé/- [y] {z}, &a *b !c.npz', key: \"'key'\"}\n"
      "compile: {loss: mse, metrics: [mae]}\n",
      dir.path());
  testing::WriteFile(dir.File("spec.yaml"), JobSpecToYaml(spec));
  const std::string script = std::string(COHORT_SOURCE_DIR) + "/tests/common/job/job_helper.py";
  testing::CommandResult result = testing::RunCommand(
      {COHORT_VENV_PYTHON, script, "yaml-to-json", dir.File("spec.yaml"), dir.File("spec.json")});
  INFO(result.output);
  REQUIRE(result.status.code == 0);
  nlohmann::json json = nlohmann::json::parse(testing::ReadFile(dir.File("spec.json")));
  INFO(json.dump(2));
  CHECK(json["name"] == "odd");
  CHECK(json["model"] == dir.path() + "/dir with spaces/m: #1.keras");
  CHECK(json["data"]["x"] == dir.path() + "/quote\" and \\ backslash.npy");
  CHECK(json["data"]["y"]["path"] == dir.path() + "/ünïcødé/- [y] {z}, &a *b !c.npz");
  CHECK(json["data"]["y"]["key"] == "'key'");
  CHECK(json["data"]["validation_split"] == 0);
  CHECK(json["fit"]["shuffle"] == true);
  CHECK(json["fit"]["batch_size"] == 32);
  CHECK(json["compile"]["loss"]["name"] == "mean_squared_error");
  CHECK(json["compile"]["metrics"] == nlohmann::json::array({"mae"}));
  CHECK(json["resources"]["device"] == "cpu");
  CHECK(RoundTrip(spec) == spec);
}

TEST_CASE("the examples in docs/job-spec.md are valid and printed as documented", "[job]") {
  const std::string doc = testing::ReadFile(std::string(COHORT_SOURCE_DIR) + "/docs/job-spec.md");
  std::vector<std::string> blocks;
  for (size_t start = doc.find("```yaml\n"); start != std::string::npos;
       start = doc.find("```yaml\n", start)) {
    start += 8;
    const size_t end = doc.find("```", start);
    REQUIRE(end != std::string::npos);
    blocks.push_back(doc.substr(start, end - start));
  }
  REQUIRE(blocks.size() == 5);  // the overview, three examples, the printed example
  for (const std::string& block : blocks) {
    INFO(block);
    CHECK(ParseJobSpec(block, "/jobs", "regression").ok());
  }
  // The regression example, as /jobs/regression.yaml.
  absl::StatusOr<JobSpec> regression = ParseJobSpec(blocks[3], "/jobs", "regression");
  REQUIRE(regression.ok());
  CHECK(JobSpecToYaml(*regression) == blocks[4]);
}

}  // namespace
}  // namespace cohort::job
