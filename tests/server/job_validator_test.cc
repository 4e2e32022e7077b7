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
};

std::string Refusal(const absl::Status& s) {
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  return std::string(s.message());
}

TEST_CASE("A good job validates; an inline model becomes an artifact id", "[server][validator]") {
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

}  // namespace
}  // namespace cohort::server
