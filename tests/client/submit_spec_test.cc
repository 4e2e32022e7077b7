#include "client/submit_spec.h"

#include <catch2/catch.hpp>

#include "tests/support/temp_dir.h"

namespace cohort::client {
namespace {

using cohort::testing::TempDir;
using cohort::testing::WriteFile;

SubmitFlags ModelFlags() {
  SubmitFlags f;
  f.target = "model.keras";
  f.x = "data/x.npy";
  f.y = "data/y.npy";
  return f;
}

std::string ErrorOf(const SubmitFlags& flags, const std::string& cwd = "/work") {
  absl::StatusOr<job::JobSpec> spec = ResolveSubmitSpec(flags, cwd);
  if (spec.ok()) return "(ok)";
  CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST_CASE("A model file with --x/--y gets Keras' fit defaults and absolute paths", "[client]") {
  absl::StatusOr<job::JobSpec> spec = ResolveSubmitSpec(ModelFlags(), "/work/project");
  REQUIRE(spec.ok());
  CHECK(spec->name == "model");
  CHECK(spec->model.path == "/work/project/model.keras");
  CHECK(spec->model.format == job::ModelFormat::kKeras);
  CHECK(spec->data.x.path == "/work/project/data/x.npy");
  CHECK(spec->data.y.path == "/work/project/data/y.npy");
  CHECK(spec->fit == job::FitSpec{});  // epochs 1, batch 32, shuffle, seed 0
  CHECK(spec->resources == job::ResourcesSpec{});
  // Nothing set: the model file's compile_config applies.
  CHECK(spec->compile == job::CompileOverrides{});
  CHECK(spec->max_restarts == 3);
}

TEST_CASE("Every fit, compile and resource flag lands in its field", "[client]") {
  SubmitFlags f = ModelFlags();
  f.target = "../models/My Model!.json";
  f.validation_x = "/abs/vx.npy";
  f.validation_y = "vy.npy";
  f.epochs = "10";
  f.batch_size = "256";
  f.shuffle = false;
  f.seed = "18446744073709551615";
  f.optimizer = "SGD";
  f.learning_rate = "0.05";
  f.loss = "sparse_categorical_crossentropy";
  f.from_logits = true;
  f.metrics = std::vector<std::string>{"accuracy,mae", "mse"};
  f.workers = "8";
  f.device = "cuda";
  f.priority = "-5";
  f.max_restarts = "0";
  f.checkpoint_every = "0";
  f.checkpoint_keep = "4";
  absl::StatusOr<job::JobSpec> spec = ResolveSubmitSpec(f, "/work/project");
  REQUIRE(spec.ok());
  CHECK(spec->name == "My-Model-");
  CHECK(spec->model.path == "/work/models/My Model!.json");
  CHECK(spec->model.format == job::ModelFormat::kJson);
  CHECK(spec->data.validation_x->path == "/abs/vx.npy");
  CHECK(spec->data.validation_y->path == "/work/project/vy.npy");
  CHECK(spec->fit.epochs == 10);
  CHECK(spec->fit.batch_size == 256);
  CHECK_FALSE(spec->fit.shuffle);
  CHECK(spec->fit.seed == 18446744073709551615ull);
  CHECK(spec->compile.optimizer.kind == keras::OptimizerKind::kSgd);
  REQUIRE(spec->compile.optimizer.learning_rate.has_value());
  CHECK(spec->compile.optimizer.learning_rate->initial == 0.05);
  REQUIRE(spec->compile.loss.has_value());
  CHECK(spec->compile.loss->kind == keras::LossKind::kSparseCategoricalCrossentropy);
  CHECK(spec->compile.loss->from_logits);
  REQUIRE(spec->compile.metrics.size() == 3);
  CHECK(spec->compile.metrics[0].name == "accuracy");
  CHECK(spec->compile.metrics[1].kind == keras::MetricKind::kMeanAbsoluteError);
  CHECK(spec->compile.metrics[2].name == "mse");
  CHECK(spec->resources.workers == 8);
  CHECK(spec->resources.device == job::Device::kCuda);
  CHECK(spec->priority == -5);
  CHECK(spec->max_restarts == 0);
  CHECK(spec->checkpoint.every_epochs == 0);
  CHECK(spec->checkpoint.keep == 4);
}

TEST_CASE("A learning rate alone changes the model file's optimizer, not its kind", "[client]") {
  SubmitFlags f = ModelFlags();
  f.learning_rate = "1e-4";
  absl::StatusOr<job::JobSpec> spec = ResolveSubmitSpec(f, "/w");
  REQUIRE(spec.ok());
  CHECK_FALSE(spec->compile.optimizer.kind.has_value());
  CHECK(spec->compile.optimizer.learning_rate->initial == 1e-4);
  CHECK_FALSE(spec->compile.loss.has_value());
}

TEST_CASE(".npz members: --key and --y-key, y defaulting to x's file", "[client]") {
  SubmitFlags f;
  f.target = "m.keras";
  f.x = "d.npz";
  f.x_key = "x_train";
  f.y_key = "y_train";
  f.validation_x = "d.npz";
  f.validation_x_key = "x_test";
  f.validation_y_key = "y_test";
  absl::StatusOr<job::JobSpec> spec = ResolveSubmitSpec(f, "/w");
  REQUIRE(spec.ok());
  CHECK(spec->data.x == job::ArrayRef{"/w/d.npz", "x_train"});
  CHECK(spec->data.y == job::ArrayRef{"/w/d.npz", "y_train"});
  CHECK(*spec->data.validation_x == job::ArrayRef{"/w/d.npz", "x_test"});
  CHECK(*spec->data.validation_y == job::ArrayRef{"/w/d.npz", "y_test"});

  f.x_key.reset();
  CHECK(ErrorOf(f) ==
        "data.x: '/work/d.npz' is an .npz file: name its member with {path: FILE.npz, key: "
        "ARRAY}");
}

TEST_CASE("Flags apply over a JOB.yaml, whose paths stay relative to it", "[client]") {
  TempDir dir;
  WriteFile(dir.File("job.yaml"),
            "name: digits\nmodel: m.keras\ndata:\n  x: x.npy\n  y: y.npy\n  validation_split: 0.2\n"
            "fit:\n  epochs: 3\n  batch_size: 64\n");
  SubmitFlags f;
  f.target = dir.File("job.yaml");
  absl::StatusOr<job::JobSpec> plain = ResolveSubmitSpec(f, "/elsewhere");
  REQUIRE(plain.ok());
  CHECK(plain->name == "digits");
  CHECK(plain->model.path == dir.File("m.keras"));
  CHECK(plain->fit.epochs == 3);
  CHECK(plain->data.validation_split == 0.2);

  f.epochs = "5";
  f.workers = "2";
  f.name = "digits-2";
  f.validation_x = "vx.npy";
  f.validation_y = "vy.npy";
  f.precision = "mixed_bfloat16";
  absl::StatusOr<job::JobSpec> spec = ResolveSubmitSpec(f, "/elsewhere");
  REQUIRE(spec.ok());
  CHECK(spec->name == "digits-2");
  CHECK(spec->fit.epochs == 5);
  CHECK(spec->fit.batch_size == 64);
  CHECK(spec->fit.precision == job::Precision::kMixedBfloat16);
  CHECK(plain->fit.precision == job::Precision::kFloat32);
  CHECK(spec->resources.workers == 2);
  CHECK(spec->data.validation_split == 0);  // validation data replaces the split
  CHECK(spec->data.validation_x->path == "/elsewhere/vx.npy");

  SubmitFlags bad;
  bad.target = dir.File("missing.yaml");
  absl::StatusOr<job::JobSpec> missing = ResolveSubmitSpec(bad, "/");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("Bad flags are refused with the flag's name", "[client]") {
  auto with = [](auto set) {
    SubmitFlags f = ModelFlags();
    set(f);
    return ErrorOf(f);
  };
  CHECK(with([](SubmitFlags& f) { f.epochs = "ten"; }) ==
        "--epochs: must be an integer >= 1, got 'ten'");
  CHECK(with([](SubmitFlags& f) { f.epochs = "0"; }) == "--epochs: must be an integer >= 1, got '0'");
  CHECK(with([](SubmitFlags& f) { f.epochs = "99999999999"; }) ==
        "--epochs: must be an integer >= 1, got '99999999999'");
  CHECK(with([](SubmitFlags& f) { f.batch_size = "-1"; }) ==
        "--batch-size: must be an integer >= 1, got '-1'");
  CHECK(with([](SubmitFlags& f) { f.seed = "-3"; }) ==
        "--seed: must be an integer in [0, 2^64), got '-3'");
  CHECK(with([](SubmitFlags& f) { f.precision = "bf16"; }) ==
        "--precision: 'bf16' is not supported; supported: float32, mixed_bfloat16");
  CHECK(with([](SubmitFlags& f) { f.validation_split = "1"; }) ==
        "--validation-split: must be in [0, 1), got '1'");
  CHECK(with([](SubmitFlags& f) { f.validation_split = "abc"; }) ==
        "--validation-split: must be a number, got 'abc'");
  CHECK(with([](SubmitFlags& f) {
          f.validation_split = "0.1";
          f.validation_x = "vx.npy";
          f.validation_y = "vy.npy";
        }) == "--validation-split: cannot be combined with --validation-x/--validation-y");
  CHECK(with([](SubmitFlags& f) { f.validation_x = "vx.npy"; }) ==
        "--validation-y: required with --validation-x");
  CHECK(with([](SubmitFlags& f) { f.learning_rate = "0"; }) == "--learning-rate: must be > 0, got '0'");
  CHECK(with([](SubmitFlags& f) { f.learning_rate = "nan"; }) ==
        "--learning-rate: must be a number, got 'nan'");
  CHECK(with([](SubmitFlags& f) { f.optimizer = "lion"; })
            .rfind("--optimizer: unknown optimizer 'lion' (supported: ", 0) == 0);
  CHECK(with([](SubmitFlags& f) { f.loss = "hinge"; }).rfind("--loss: unknown loss 'hinge'", 0) == 0);
  CHECK(with([](SubmitFlags& f) { f.from_logits = true; }) ==
        "--from-logits: needs --loss (the loss it applies to)");
  CHECK(with([](SubmitFlags& f) {
          f.loss = "mse";
          f.from_logits = true;
        }) == "--from-logits: not an option of mean_squared_error");
  CHECK(with([](SubmitFlags& f) { f.metrics = std::vector<std::string>{"accuracy,f1"}; })
            .rfind("--metrics: unknown metric 'f1'", 0) == 0);
  CHECK(with([](SubmitFlags& f) { f.workers = "0"; }) == "--workers: must be an integer >= 1, got '0'");
  CHECK(with([](SubmitFlags& f) { f.device = "tpu"; }) == "--device: must be cpu or cuda, got 'tpu'");
  CHECK(with([](SubmitFlags& f) { f.priority = "high"; }) ==
        "--priority: must be a 32-bit integer, got 'high'");
  CHECK(with([](SubmitFlags& f) { f.max_restarts = "-1"; }) ==
        "--max-restarts: must be an integer >= 0, got '-1'");
  CHECK(with([](SubmitFlags& f) { f.checkpoint_keep = "0"; }) ==
        "--checkpoint-keep: must be an integer >= 1, got '0'");
  CHECK(with([](SubmitFlags& f) { f.name = "bad name"; }).rfind("--name: ", 0) == 0);
  // What only the whole spec can say comes from job::ValidateJobSpec, by field.
  CHECK(with([](SubmitFlags& f) {
          f.workers = "3";
          f.batch_size = "64";
        }).rfind("fit.batch_size: the global batch 64 is not divisible by resources.workers (3)", 0) == 0);
  CHECK(with([](SubmitFlags& f) { f.x = "x.csv"; }) ==
        "data.x: must be a .npy file or {path: FILE.npz, key: ARRAY}, got '/work/x.csv'");
}

TEST_CASE("The target and the required data flags", "[client]") {
  SubmitFlags f = ModelFlags();
  f.target = "model.h5";
  CHECK(ErrorOf(f).rfind("JOB: expected a JOB.yaml, a MODEL.keras or the MODEL.json", 0) == 0);
  f = ModelFlags();
  f.x.reset();
  CHECK(ErrorOf(f) == "--x: required with a model file (the training inputs)");
  f = ModelFlags();
  f.y.reset();
  CHECK(ErrorOf(f) == "--y: required with a model file (the training targets)");
  f.target.clear();
  CHECK(ErrorOf(f) == "JOB: give a JOB.yaml, or a MODEL.keras with --x and --y");
}

TEST_CASE("Paths are made absolute and normalized", "[client]") {
  CHECK(AbsolutePath("a/../b/./c.npy", "/w") == "/w/b/c.npy");
  CHECK(AbsolutePath("/x/y/", "/w") == "/x/y");
  CHECK(AbsolutePath("../up.keras", "/w/sub") == "/w/up.keras");
}

}  // namespace
}  // namespace cohort::client
