// Submit validation: what a bad job is told, field first, before anything is stored.

#include "server/job_validator.h"

#include <catch2/catch.hpp>

#include <filesystem>

#include "common/zip/zip_writer.h"
#include "tests/server/job_fixtures.h"
#include "tests/support/temp_dir.h"

namespace cohort::server {
namespace {

using cohort::testing::ReadFile;
using cohort::testing::TempDir;
using testing::ClassifierJson;
using testing::ClassifierSpec;
using testing::WriteData;

struct Fixture {
  TempDir dir;
  std::unique_ptr<ArtifactStore> artifacts;
  std::vector<WorkerCapacity> cluster;
  std::unique_ptr<JobValidator> validator;

  Fixture() {
    artifacts = *ArtifactStore::Create(dir.path(), {.max_upload_bytes = 1 << 20,
                                                    .max_model_bytes = 64 << 10});
    validator = std::make_unique<JobValidator>(artifacts.get(), [this] { return cluster; });
    WriteData(dir.path(), 40, 64, 9);
  }
  void AddWorker(const std::string& name, int cpu_slots) {
    WorkerCapacity c;
    c.name = name;
    c.total_cpu_slots = cpu_slots;
    for (int i = 0; i < cpu_slots; ++i) c.free_cpu_slots.push_back(i);
    cluster.push_back(c);
  }
  absl::Status Check(const v1::JobSpec& spec) { return validator->Validate(spec).status(); }
  void SetLimits(JobLimits limits) {
    validator = std::make_unique<JobValidator>(artifacts.get(), [this] { return cluster; },
                                               std::move(limits));
  }
};

std::string Refusal(const absl::Status& s) {
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  return std::string(s.message());
}

TEST_CASE("A good job validates and an inline model becomes an artifact id", "[server][validator]") {
  Fixture f;
  v1::JobSpec spec = ClassifierSpec(f.dir.path());
  absl::StatusOr<ValidatedJob> v = f.validator->Validate(spec);
  INFO(v.status().ToString());
  REQUIRE(v.ok());
  CHECK(v->inline_extension == "json");
  CHECK(v->inline_model == spec.config_json());
  CHECK(v->stored.model_case() == v1::JobSpec::kModelArtifactId);
  CHECK(v->stored.model_artifact_id() == ArtifactStore::UploadIdFor("json", spec.config_json()));
  // Validation stores nothing.
  CHECK(std::filesystem::is_empty(f.dir.path() + "/artifacts"));
  // The resolved spec has the defaults and the compile settings filled in.
  CHECK(v->resolved.compile().optimizer().kind() == v1::OPTIMIZER_KIND_RMSPROP);
  CHECK(v->resolved.compile().loss().kind() == v1::LOSS_KIND_SPARSE_CATEGORICAL_CROSSENTROPY);
  CHECK(v->resolved.checkpoint().keep() == 2);
  CHECK(v->resolved.max_restarts() == 3);
  CHECK(v->resolved.data().x().path() == f.dir.path() + "/x.npy");
}

TEST_CASE("Models by path, as .keras and .json, and as uploaded artifacts", "[server][validator]") {
  Fixture f;
  const std::string json = ClassifierJson();
  {
    auto zip = zip::ZipWriter::Create(f.dir.File("m.keras"));
    REQUIRE((*zip)->Add("config.json", json, zip::Method::kDeflate).ok());
    REQUIRE((*zip)->Finish().ok());
  }
  v1::JobSpec spec = ClassifierSpec(f.dir.path());
  spec.set_keras_path(f.dir.File("m.keras"));
  CHECK(f.Check(spec).ok());
  spec.set_keras_file(ReadFile(f.dir.File("m.keras")));
  CHECK(f.Check(spec).ok());
  std::string id = *f.artifacts->PutUpload("json", json);
  spec.set_model_artifact_id(id);
  CHECK(f.Check(spec).ok());
  spec.mutable_data()->mutable_x()->set_artifact_id(std::string(64, 'a') + ".npy");
  CHECK(Refusal(f.Check(spec)) == "data.x: artifact '" + std::string(64, 'a') + ".npy' not found");
  spec = ClassifierSpec(f.dir.path());
  spec.set_keras_path(f.dir.File("missing.keras"));
  CHECK(Refusal(f.Check(spec)).rfind("model: ", 0) == 0);
}

TEST_CASE("Data that does not fit the model is refused naming the field", "[server][validator]") {
  Fixture f;
  TempDir other;
  WriteData(other.path(), 40, 63, 9);
  v1::JobSpec spec = ClassifierSpec(f.dir.path());
  spec.mutable_data()->mutable_x()->set_path(other.File("x.npy"));
  CHECK(Refusal(f.Check(spec)) == "data.x: layer 'dense' expects 64 features, data has 63");

  TempDir labels;
  WriteData(labels.path(), 40, 64, 12);
  spec = ClassifierSpec(labels.path());
  CHECK(Refusal(f.Check(spec)) ==
        "data.y: labels go up to 12 but the output has 10 classes (layer 'dense')");

  TempDir rows;
  WriteData(rows.path(), 30, 64, 9);
  spec = ClassifierSpec(f.dir.path());
  spec.mutable_data()->mutable_y()->set_path(rows.File("y.npy"));
  CHECK(Refusal(f.Check(spec)) == "data.x, data.y: x has 40 rows but y has 30");

  spec = ClassifierSpec(f.dir.path());
  spec.mutable_data()->mutable_y()->set_path(f.dir.File("nope.npy"));
  CHECK(Refusal(f.Check(spec)).rfind("data.y: ", 0) == 0);

  spec = ClassifierSpec(f.dir.path());
  spec.mutable_data()->set_validation_split(0.1);
  CHECK(f.Check(spec).ok());
  spec.mutable_data()->set_validation_split(0.99);
  CHECK(Refusal(f.Check(spec)) ==
        "data.validation_split: 0.99 of 40 rows leaves 0 to train on and 40 to validate on");
}

TEST_CASE("Model, compile and spec refusals", "[server][validator]") {
  Fixture f;
  v1::JobSpec spec = ClassifierSpec(f.dir.path());
  spec.set_config_json("{not json");
  CHECK(Refusal(f.Check(spec)).rfind("model: ", 0) == 0);

  spec = ClassifierSpec(f.dir.path());
  spec.mutable_compile()->clear_loss();
  CHECK(Refusal(f.Check(spec)).rfind("compile.loss: ", 0) == 0);

  spec = ClassifierSpec(f.dir.path(), 2);
  spec.mutable_fit()->set_batch_size(7);
  CHECK(Refusal(f.Check(spec)).rfind("fit.batch_size: ", 0) == 0);

  spec = ClassifierSpec(f.dir.path());
  spec.set_config_json(std::string(65 << 10, ' '));
  absl::Status big = f.Check(spec);
  CHECK(big.code() == absl::StatusCode::kResourceExhausted);
  CHECK(big.message() == "config_json: the model is 66560 bytes, more than --max-model-bytes (65536)");
}

TEST_CASE("Resources must be able to fit the registered cluster, if any", "[server][validator]") {
  Fixture f;
  v1::JobSpec spec = ClassifierSpec(f.dir.path(), 4);
  CHECK(f.Check(spec).ok());  // nobody registered yet: accept and queue
  f.AddWorker("w1", 1);
  f.AddWorker("w2", 2);
  CHECK(Refusal(f.Check(spec)) ==
        "resources.workers: 4 ranks on cpu can never run here: the 2 registered workers offer 3 "
        "CPU slots in all");
  spec = ClassifierSpec(f.dir.path(), 3);
  CHECK(f.Check(spec).ok());
  spec.mutable_resources()->set_device(v1::DEVICE_TYPE_CUDA);
  spec.mutable_resources()->set_workers(1);
  spec.mutable_fit()->set_batch_size(8);
  CHECK(Refusal(f.Check(spec)).rfind("resources.workers: 1 ranks on cuda can never run", 0) == 0);
}

TEST_CASE("Models that ask for absurd tensors are refused at submit, naming the layer",
          "[server][validator][limits]") {
  Fixture f;
  // A Dense kernel of 10^12 elements (4 TB of float32): refused before any data is read.
  v1::JobSpec spec = ClassifierSpec(f.dir.path());
  spec.set_config_json(ClassifierJson(1000000, 1000000));
  CHECK(Refusal(f.Check(spec)) ==
        "model: layer 'dense' (Dense) has more parameters than the limit of 2147483648 (its "
        "kernel is (1000000, 1000000))");

  JobLimits limits;
  limits.model.max_parameters = 650;  // the classifier has 64 * 10 + 10 = 650
  f.SetLimits(limits);
  CHECK(f.Check(ClassifierSpec(f.dir.path())).ok());
  limits.model.max_parameters = 649;
  f.SetLimits(limits);
  CHECK(Refusal(f.Check(ClassifierSpec(f.dir.path()))) ==
        "model: layer 'dense' (Dense) has more parameters than the limit of 649 (its bias is "
        "(10,))");

  limits = {};
  limits.model.max_layers = 1;  // InputLayer and Dense
  f.SetLimits(limits);
  CHECK_THAT(Refusal(f.Check(ClassifierSpec(f.dir.path()))),
             Catch::Contains("has 2 layers, more than the limit of 1"));

  limits = {};
  limits.model.max_activation_elements = 9;  // the Dense outputs 10 per sample
  f.SetLimits(limits);
  spec = ClassifierSpec(f.dir.path());
  spec.set_config_json(ClassifierJson(8, 10));
  CHECK(Refusal(f.Check(spec)) ==
        "model: layer 'dense' (Dense) outputs (10,) per sample, more than the limit of 9 elements");
}

TEST_CASE("A step whose activations cannot fit a rank is refused", "[server][validator][limits]") {
  Fixture f;
  JobLimits limits;
  // 8 samples per rank, one Dense of 10 outputs: 80 elements.
  limits.max_step_activation_elements = 80;
  f.SetLimits(limits);
  CHECK(f.Check(ClassifierSpec(f.dir.path())).ok());
  limits.max_step_activation_elements = 79;
  f.SetLimits(limits);
  absl::Status s = f.Check(ClassifierSpec(f.dir.path()));
  CHECK(s.code() == absl::StatusCode::kResourceExhausted);
  CHECK(s.message() ==
        "fit.batch_size: a step of 8 samples per rank keeps 80 activation elements, more than "
        "the limit of 79 (the largest, layer 'dense' (Dense), outputs (10,) per sample)");
  // The global batch is split over the ranks: 16 on one rank is too much, on two not.
  limits.max_step_activation_elements = 80;
  f.SetLimits(limits);
  v1::JobSpec spec = ClassifierSpec(f.dir.path());
  spec.mutable_fit()->set_batch_size(16);
  CHECK(f.Check(spec).code() == absl::StatusCode::kResourceExhausted);
  spec = ClassifierSpec(f.dir.path(), 2);
  spec.mutable_fit()->set_batch_size(16);
  CHECK(f.Check(spec).ok());
}

TEST_CASE("Paths must stay inside the allowed data roots", "[server][validator][paths]") {
  Fixture f;
  TempDir outside;
  WriteData(outside.path(), 40, 64, 9);
  std::filesystem::create_directories(f.dir.File("data"));
  WriteData(f.dir.File("data"), 40, 64, 9);
  std::filesystem::create_symlink(outside.File("x.npy"), f.dir.File("data/link.npy"));
  JobLimits limits;
  limits.data_roots = *PathRoots::Create({f.dir.File("data")}, "--allowed-data-root");
  f.SetLimits(limits);
  const std::string root = limits.data_roots.roots()[0];

  CHECK(f.Check(ClassifierSpec(f.dir.File("data"))).ok());
  v1::JobSpec spec = ClassifierSpec(f.dir.File("data"));
  spec.mutable_data()->mutable_x()->set_path(outside.File("x.npy"));
  CHECK(Refusal(f.Check(spec)) ==
        "data.x: '" + outside.File("x.npy") + "' is outside the allowed data roots (" + root +
            "; see --allowed-data-root)");
  spec.mutable_data()->mutable_x()->set_path(f.dir.File("data") + "/../../" +
                                             std::filesystem::path(outside.path()).filename().string() +
                                             "/x.npy");
  CHECK_THAT(Refusal(f.Check(spec)), Catch::StartsWith("data.x: '") &&
                                         Catch::Contains("is outside the allowed data roots"));
  spec.mutable_data()->mutable_x()->set_path(f.dir.File("data/link.npy"));
  CHECK_THAT(Refusal(f.Check(spec)), Catch::Contains("data/link.npy' (it resolves to ") &&
                                         Catch::Contains("is outside the allowed data roots"));
  spec = ClassifierSpec(f.dir.File("data"));
  spec.mutable_data()->mutable_y()->set_path("data/y.npy");
  CHECK(Refusal(f.Check(spec)) == "data.y: 'data/y.npy' is not an absolute path");
  spec = ClassifierSpec(f.dir.File("data"));
  spec.set_config_json_path("/etc/passwd.json");
  CHECK_THAT(Refusal(f.Check(spec)), Catch::StartsWith("model: cannot read /etc/passwd.json"));
  spec.mutable_data()->mutable_validation_x()->set_path("/etc/x.npy");
  spec.mutable_data()->mutable_validation_y()->set_path("/etc/y.npy");
  spec.set_config_json(ClassifierJson());
  CHECK_THAT(Refusal(f.Check(spec)), Catch::StartsWith("data.validation_x: cannot read /etc/x.npy"));
  // Uploaded artifacts live in the coordinator's own store: always allowed.
  spec = ClassifierSpec(f.dir.File("data"));
  spec.set_model_artifact_id(*f.artifacts->PutUpload("json", ClassifierJson()));
  CHECK(f.Check(spec).ok());
  // Without roots any absolute path is allowed (the default).
  f.SetLimits({});
  spec = ClassifierSpec(f.dir.File("data"));
  spec.mutable_data()->mutable_x()->set_path(outside.File("x.npy"));
  CHECK(f.Check(spec).ok());
}

}  // namespace
}  // namespace cohort::server
