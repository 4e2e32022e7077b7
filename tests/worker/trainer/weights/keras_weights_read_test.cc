#include <catch2/catch.hpp>

#include <random>

#include "absl/strings/match.h"
#include "tests/support/temp_dir.h"
#include "tests/worker/trainer/weights/keras_fixtures.h"
#include "worker/trainer/weights/keras_weights.h"

namespace cohort::trainer {
namespace {

using testing::CheckSameWeights;
using testing::ExpectedVariable;

void CheckVariable(const KerasVariable& got, const ExpectedVariable& want) {
  CHECK(got.shape == want.shape);
  if (want.dtype == "float32") {
    CHECK(got.dtype == KerasDType::kFloat32);
    CHECK(got.values == want.floats);  // exact: every bit Keras saved
  } else {
    CHECK(got.dtype == (want.dtype == "int32" ? KerasDType::kInt32 : KerasDType::kInt64));
    CHECK(got.int_values == want.ints);
  }
}

std::string KerasFile(const std::string& name) {
  return testing::KerasModelsDir() + "/" + name;
}

void CheckReadsEveryVariable() {
  for (const std::string& model : testing::kKerasFixtureModels) {
    INFO(model);
    absl::StatusOr<KerasWeights> weights = ReadKerasWeightsFile(KerasFile(model + ".weights.h5"));
    REQUIRE(weights.ok());
    testing::ExpectedModel expected = testing::LoadExpectedModel(testing::KerasModelsDir(), model);

    absl::StatusOr<const KerasVarGroup*> root = weights->FindGroup("vars");
    REQUIRE(root.ok());
    CHECK((*root)->name == expected.model_name);
    CHECK((*root)->variables.empty());

    std::vector<std::string> class_names;
    for (const auto& layer : expected.layers) class_names.push_back(layer.class_name);
    std::vector<std::string> paths = KerasLayerGroupPaths(class_names);
    for (size_t l = 0; l < expected.layers.size(); ++l) {
      INFO(paths[l]);
      absl::StatusOr<const KerasVarGroup*> group = weights->FindGroup(paths[l]);
      REQUIRE(group.ok());
      CHECK((*group)->name == expected.layers[l].name);
      REQUIRE((*group)->variables.size() == expected.layers[l].variables.size());
      for (size_t i = 0; i < expected.layers[l].variables.size(); ++i) {
        CheckVariable((*group)->variables[i], expected.layers[l].variables[i]);
      }
    }
    // Nothing else: one group per layer plus the model's own.
    CHECK(weights->groups.size() == expected.layers.size() + 1);

    REQUIRE(weights->optimizer.size() == 1);
    const KerasVarGroup& optimizer = weights->optimizer[0];
    CHECK(optimizer.path == "optimizer/vars");
    CHECK(optimizer.name == expected.optimizer_name);
    REQUIRE(optimizer.variables.size() == expected.optimizer.size());
    for (size_t i = 0; i < expected.optimizer.size(); ++i) {
      INFO("optimizer variable " << i);
      CheckVariable(optimizer.variables[i], expected.optimizer[i]);
    }
    CHECK(optimizer.variables[0].int_values == std::vector<int64_t>{1});  // one step taken
  }
}

void CheckReadsOtherEncodings() {
  absl::StatusOr<KerasWeights> keras = ReadKerasWeightsFile(KerasFile("mlp.weights.h5"));
  absl::StatusOr<KerasWeights> float64 = ReadKerasWeightsFile(KerasFile("mlp_f64.weights.h5"));
  absl::StatusOr<KerasWeights> gzip = ReadKerasWeightsFile(KerasFile("mlp_gzip.weights.h5"));
  REQUIRE(keras.ok());
  REQUIRE(float64.ok());
  REQUIRE(gzip.ok());
  CheckSameWeights(*keras, *float64);
  CheckSameWeights(*keras, *gzip);
}

void CheckFindVariable() {
  absl::StatusOr<KerasWeights> weights =
      ReadKerasWeights(testing::ReadFile(KerasFile("mlp.weights.h5")));
  REQUIRE(weights.ok());
  CHECK(weights->file_name == "model.weights.h5");

  absl::StatusOr<const KerasVariable*> kernel =
      weights->FindVariable("layers/dense/vars", 0, std::vector<int64_t>{20, 16});
  REQUIRE(kernel.ok());
  CHECK((*kernel)->values.size() == 320);

  absl::StatusOr<const KerasVariable*> wrong =
      weights->FindVariable("layers/dense/vars", 0, std::vector<int64_t>{20, 32});
  CHECK(wrong.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(wrong.status().message() ==
        "model.weights.h5: layers/dense/vars/0 has shape (20, 16), the model expects (20, 32)");
  wrong = weights->FindVariable("layers/dense/vars", 1, std::vector<int64_t>{8});
  CHECK(wrong.status().message() ==
        "model.weights.h5: layers/dense/vars/1 has shape (16,), the model expects (8,)");
  wrong = weights->FindVariable("layers/dense/vars", 2, std::vector<int64_t>{16});
  CHECK(wrong.status().code() == absl::StatusCode::kNotFound);
  CHECK(wrong.status().message() == "model.weights.h5: layers/dense/vars has 2 variables, no variable 2");
  wrong = weights->FindVariable("layers/dense_9/vars", 0, std::vector<int64_t>{1});
  CHECK(wrong.status().code() == absl::StatusCode::kNotFound);
  CHECK(wrong.status().message() == "model.weights.h5: has no group layers/dense_9/vars");

  absl::StatusOr<const KerasVariable*> iteration =
      weights->FindVariable("optimizer/vars", 0, std::vector<int64_t>{});
  REQUIRE(iteration.ok());
  CHECK((*iteration)->dtype == KerasDType::kInt32);
}

void CheckRefused(absl::string_view bytes, absl::string_view expected_message) {
  absl::StatusOr<KerasWeights> weights = ReadKerasWeights(bytes, "in.weights.h5");
  REQUIRE(!weights.ok());
  CHECK(weights.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(weights.status().message()),
             Catch::StartsWith(std::string(expected_message)));
}

void CheckRefusesTruncations() {
  const std::string whole = testing::ReadFile(KerasFile("mlp.weights.h5"));
  REQUIRE(ReadKerasWeights(whole).ok());
  for (size_t size = 0; size < whole.size(); size += size < 4096 ? 7 : 331) {
    INFO("truncated to " << size << " of " << whole.size() << " bytes");
    absl::StatusOr<KerasWeights> weights = ReadKerasWeights(whole.substr(0, size), "in.weights.h5");
    REQUIRE(!weights.ok());
    CHECK(weights.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(weights.status().message()), Catch::StartsWith("in.weights.h5: is "));
  }
}

// One test case, so that one process makes the Keras fixtures (~15 s) for all of these.
TEST_CASE("reads files Keras saved", "[keras]") {
  SECTION("every variable, exactly, at the paths Keras names") { CheckReadsEveryVariable(); }
  SECTION("float64 datasets as float32, and chunked compressed ones") {
    CheckReadsOtherEncodings();
  }
  SECTION("FindVariable checks the shape the model expects") { CheckFindVariable(); }
  SECTION("refuses every truncation of a Keras file") { CheckRefusesTruncations(); }
}

TEST_CASE("refuses bytes that are not an HDF5 file") {
  CheckRefused("", "in.weights.h5: is not an HDF5 file");
  std::mt19937 random(1);
  std::string garbage(4096, '\0');
  for (char& c : garbage) c = static_cast<char>(random());
  CheckRefused(garbage, "in.weights.h5: is not an HDF5 file");
  // A zip (a .keras file) instead of the h5 inside it.
  CheckRefused(std::string("PK\x03\x04", 4) + garbage, "in.weights.h5: is not an HDF5 file");
  CheckRefused(std::string("\x89HDF\r\n\x1a\n", 8) + garbage,
               "in.weights.h5: is a truncated or corrupt HDF5 file");

}

TEST_CASE("refuses malformed weights files, naming the file and the object", "[h5py]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"int_kernel", "layers/dense/vars/0 has dtype int32; weights must be float32 or float64"},
      {"float16_kernel", "layers/dense/vars/0 has dtype float16; weights must be float32"},
      {"uint8_optimizer", "optimizer/vars/0 has dtype uint8; optimizer variables must be float32, "
                          "float64, int32 or int64"},
      {"soft_link", "layers/dense/vars/1 is a soft or external link"},
      {"misnamed", "layers/dense/vars/kernel is misnamed: the datasets of a vars group are named "
                   "0 to n-1 (here n = 1)"},
      {"gap", "layers/dense/vars/2 is misnamed"},
      {"group_in_vars", "layers/dense/vars/extra is not a dataset"},
      {"null_space", "layers/dense/vars/0 has no shape"},
      {"keras2", "dense/dense/kernel:0 is a dataset outside any vars group: not a Keras 3 "
                 "weights file"},
      {"no_vars", "has no vars group: not a Keras 3 weights file"},
  };
  for (const auto& [name, message] : cases) {
    const std::string path = testing::BadWeightsDir() + "/" + name + ".weights.h5";
    INFO(path);
    absl::StatusOr<KerasWeights> weights = ReadKerasWeightsFile(path);
    REQUIRE(!weights.ok());
    CHECK(weights.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(weights.status().message()), Catch::StartsWith(path + ": " + message));
  }
}

TEST_CASE("ReadKerasWeightsFile names a file it cannot open") {
  testing::TempDir dir;
  absl::StatusOr<KerasWeights> weights = ReadKerasWeightsFile(dir.File("missing.weights.h5"));
  CHECK(weights.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(weights.status().message()),
             Catch::StartsWith(dir.File("missing.weights.h5") + ": cannot open"));
}

// Inputs the keras_weights fuzzer found, kept in its corpus (tests/fuzz/corpus/).
std::string FuzzFinding(const std::string& name) {
  return std::string(COHORT_FUZZ_CORPUS) + "/keras_weights/" + name;
}

TEST_CASE("a file that crashes libhdf5 is refused, and the reader survives") {
  // A damaged global heap reference in a vars group's `name` attribute makes libhdf5
  // 1.10 read out of bounds (SIGSEGV).
  const std::string path = FuzzFinding("crash-hdf5-global-heap");
  absl::StatusOr<KerasWeights> weights = ReadKerasWeightsFile(path);
  REQUIRE_FALSE(weights.ok());
  CHECK(weights.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(weights.status().message()),
             Catch::Contains("crashes the HDF5 library") && Catch::Contains(path));
}

TEST_CASE("a file that makes libhdf5 loop forever is refused in bounded time") {
  // Another damaged global heap: libhdf5 1.10 spins in H5C_protect without end.
  const std::string path = FuzzFinding("hang-hdf5-global-heap");
  absl::StatusOr<KerasWeights> weights = ReadKerasWeightsFile(path);
  REQUIRE_FALSE(weights.ok());
  CHECK(weights.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(weights.status().message()),
             Catch::Contains("did not finish reading it in 10 s") && Catch::Contains(path));
}

TEST_CASE("a vars group whose link names repeat is refused") {
  // A damaged group lists dataset "1" twice and no "0"; it was read as a variable 0
  // with no shape and no values.
  absl::StatusOr<KerasWeights> weights = ReadKerasWeightsFile(FuzzFinding("repeated-link-name"));
  REQUIRE_FALSE(weights.ok());
  CHECK(weights.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(weights.status().message()),
             Catch::Contains("layers/dense/vars/1 appears twice"));
}

}  // namespace
}  // namespace cohort::trainer
