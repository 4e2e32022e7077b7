#include "worker/agent/trainer_launch.h"

#include <catch2/catch.hpp>

#include <algorithm>

#include "common/job/job_spec_yaml.h"

namespace cohort::agent {
namespace {

const std::string kModelId = std::string(64, 'a') + ".keras";
const std::string kXId = std::string(64, 'b') + ".npy";

v1::Assignment Start(int rank = 1, int world = 2) {
  v1::Assignment a;
  a.set_action(v1::ASSIGNMENT_ACTION_START);
  a.mutable_rank()->set_job_id("job-7");
  a.mutable_rank()->set_attempt(3);
  a.mutable_rank()->set_rank(rank);
  a.set_world_size(world);
  a.set_slot(1);
  a.set_rendezvous_namespace("job-7/3");
  v1::JobSpec* spec = a.mutable_spec();
  spec->set_name("digits");
  spec->set_model_artifact_id(kModelId);
  spec->mutable_data()->mutable_x()->set_artifact_id(kXId);
  spec->mutable_data()->mutable_y()->set_path("/shared/y.npy");
  spec->mutable_fit()->set_epochs(4);
  spec->mutable_fit()->set_batch_size(64);
  spec->mutable_resources()->set_workers(world);
  for (const std::string& id : {kModelId, kXId}) {
    v1::DataArtifact* d = a.add_data_artifacts();
    d->set_artifact_id(id);
    d->set_size_bytes(10);
    d->set_sha256(std::string(64, '0'));
  }
  return a;
}

TEST_CASE("paths follow the work-dir layout", "[agent][launch]") {
  RankPaths paths = PathsOf("/w", Start().rank());
  CHECK(paths.out_dir == "/w/jobs/job-7/rank-1");
  CHECK(paths.attempt_dir == "/w/jobs/job-7/attempt-3");
  CHECK(paths.job_yaml == "/w/jobs/job-7/attempt-3/job.yaml");
}

TEST_CASE("the job.yaml names the cached files in place of artifact ids", "[agent][launch]") {
  std::map<std::string, std::string> paths = {{kModelId, "/w/cache/" + kModelId},
                                              {kXId, "/w/cache/" + kXId}};
  absl::StatusOr<std::string> yaml = TrainerJobYaml(Start(), paths);
  REQUIRE(yaml.ok());
  INFO(*yaml);
  CHECK(yaml->find(kModelId) != std::string::npos);
  absl::StatusOr<job::JobSpec> spec = job::ParseJobSpec(*yaml, "/", "unused");
  REQUIRE(spec.ok());
  CHECK(spec->name == "digits");
  CHECK(spec->model.path == "/w/cache/" + kModelId);
  CHECK(spec->model.format == job::ModelFormat::kKeras);
  CHECK(spec->data.x.path == "/w/cache/" + kXId);
  CHECK(spec->data.y.path == "/shared/y.npy");
  CHECK(spec->fit.epochs == 4);
  CHECK(spec->fit.batch_size == 64);
  CHECK(spec->fit.precision == job::Precision::kFloat32);  // PRECISION_UNSPECIFIED
  CHECK(spec->resources.workers == 2);

  v1::Assignment mixed = Start();
  mixed.mutable_spec()->mutable_fit()->set_precision(v1::PRECISION_MIXED_BFLOAT16);
  absl::StatusOr<std::string> mixed_yaml = TrainerJobYaml(mixed, paths);
  REQUIRE(mixed_yaml.ok());
  CHECK(job::ParseJobSpec(*mixed_yaml, "/", "x")->fit.precision == job::Precision::kMixedBfloat16);

  v1::Assignment unknown = Start();
  unknown.mutable_spec()->mutable_fit()->set_precision(static_cast<v1::Precision>(9));
  absl::StatusOr<std::string> refused = TrainerJobYaml(unknown, paths);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("fit.precision") != std::string::npos);
}

TEST_CASE("a spec the trainer would refuse is refused here, naming the field", "[agent][launch]") {
  std::map<std::string, std::string> paths = {{kModelId, "/w/cache/" + kModelId}};
  absl::StatusOr<std::string> missing = TrainerJobYaml(Start(), paths);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find(kXId) != std::string::npos);

  v1::Assignment bad = Start();
  bad.mutable_spec()->mutable_fit()->set_batch_size(63);  // not divisible by 2 workers
  paths[kXId] = "/w/cache/" + kXId;
  absl::StatusOr<std::string> yaml = TrainerJobYaml(bad, paths);
  REQUIRE_FALSE(yaml.ok());
  CHECK(yaml.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(yaml.status().message().find("batch_size") != std::string::npos);

  v1::Assignment unnamed = Start();
  unnamed.mutable_spec()->clear_name();
  absl::StatusOr<std::string> named = TrainerJobYaml(unnamed, paths);
  REQUIRE(named.ok());
  CHECK(job::ParseJobSpec(*named, "/", "x")->name == "job-7");
}

TEST_CASE("START assignments the agent cannot act on are refused", "[agent][launch]") {
  CHECK(CheckStartAssignment(Start()).ok());
  auto refused = [](const std::function<void(v1::Assignment&)>& change, const std::string& field) {
    v1::Assignment a = Start();
    change(a);
    absl::Status s = CheckStartAssignment(a);
    INFO(s.ToString());
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(s.message().find(field) != std::string::npos);
  };
  refused([](auto& a) { a.mutable_rank()->set_job_id("../etc"); }, "job_id");
  refused([](auto& a) { a.mutable_rank()->set_job_id(""); }, "job_id");
  refused([](auto& a) { a.mutable_rank()->set_attempt(0); }, "attempt");
  refused([](auto& a) { a.mutable_rank()->set_rank(2); }, "rank");
  refused([](auto& a) { a.mutable_rank()->set_rank(-1); }, "rank");
  refused([](auto& a) { a.set_rendezvous_namespace("job-7/2"); }, "rendezvous_namespace");
  refused([](auto& a) { a.set_checkpoint_artifact("checkpoints/.."); }, "checkpoint_artifact");
  refused([](auto& a) { a.mutable_data_artifacts(0)->set_artifact_id("a/b"); }, "artifact_id");
}

bool Has(const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it != argv.end() && it + 1 != argv.end() && *(it + 1) == value;
}

TEST_CASE("the trainer's command line", "[agent][launch]") {
  LaunchSettings settings;
  settings.trainer_binary = "/usr/bin/cohort-worker";
  settings.coordinator = HostPort{"10.0.0.1", 7070};
  settings.advertise_address = "10.0.0.5";
  settings.threads = 4;
  RankPaths paths = PathsOf("/w", Start().rank());

  TrainerCommand cpu = TrainerCommandFor(Start(), paths, settings);
  REQUIRE(cpu.argv.size() >= 3);
  CHECK(cpu.argv[0] == "/usr/bin/cohort-worker");
  CHECK(cpu.argv[1] == "train");
  CHECK(cpu.argv[2] == paths.job_yaml);
  CHECK(Has(cpu.argv, "--rank", "1"));
  CHECK(Has(cpu.argv, "--world", "2"));
  CHECK(Has(cpu.argv, "--rendezvous", "coordinator://10.0.0.1:7070/job-7/3"));
  CHECK(Has(cpu.argv, "--out", paths.out_dir));
  CHECK(Has(cpu.argv, "--hostname", "10.0.0.5"));
  CHECK(Has(cpu.argv, "--threads", "4"));
  CHECK(std::count(cpu.argv.begin(), cpu.argv.end(), "--resume") == 0);
  CHECK(std::count(cpu.argv.begin(), cpu.argv.end(), "--device") == 0);
  CHECK(std::count(cpu.argv.begin(), cpu.argv.end(), "--trace") == 0);
  CHECK(cpu.env.empty());

  v1::Assignment gpu = Start();
  gpu.mutable_spec()->mutable_resources()->set_device(v1::DEVICE_TYPE_CUDA);
  gpu.set_slot(3);
  gpu.set_resume(true);
  gpu.mutable_spec()->set_trace(true);
  TrainerCommand cuda = TrainerCommandFor(gpu, paths, settings);
  CHECK(Has(cuda.argv, "--device", "cuda"));
  CHECK(std::count(cuda.argv.begin(), cuda.argv.end(), "--trace") == 1);
  CHECK(std::count(cuda.argv.begin(), cuda.argv.end(), "--resume") == 1);
  CHECK(std::count(cuda.argv.begin(), cuda.argv.end(), "--threads") == 0);
  CHECK(cuda.env.at("CUDA_VISIBLE_DEVICES") == "3");
}

}  // namespace
}  // namespace cohort::agent
