#include "worker/agent/trainer_launch.h"

#include "absl/strings/str_cat.h"
#include "common/job/job_spec_yaml.h"
#include "proto/job_spec_convert.h"
#include "worker/agent/artifact_transfer.h"
#include "worker/agent/coordinator_store.h"

namespace cohort::agent {

RankPaths PathsOf(const std::string& work_dir, const v1::RankRef& rank) {
  RankPaths paths;
  std::string job_dir = absl::StrCat(work_dir, "/jobs/", rank.job_id());
  paths.out_dir = absl::StrCat(job_dir, "/rank-", rank.rank());
  paths.attempt_dir = absl::StrCat(job_dir, "/attempt-", rank.attempt());
  paths.job_yaml = paths.attempt_dir + "/job.yaml";
  return paths;
}

absl::Status CheckStartAssignment(const v1::Assignment& a) {
  if (absl::Status s = CheckFileName(a.rank().job_id(), "rank.job_id"); !s.ok()) return s;
  if (a.rank().attempt() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("rank.attempt: ", a.rank().attempt(), " < 1"));
  }
  if (a.world_size() < 1 || a.rank().rank() < 0 || a.rank().rank() >= a.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("rank.rank: ", a.rank().rank(),
                                                   " is outside [0, world_size ", a.world_size(), ")"));
  }
  std::string ns = absl::StrCat(a.rank().job_id(), "/", a.rank().attempt());
  if (a.rendezvous_namespace() != ns) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous_namespace: '", a.rendezvous_namespace(),
                                                   "' is not '", ns, "'"));
  }
  if (a.slot() < 0) return absl::InvalidArgumentError(absl::StrCat("slot: ", a.slot(), " < 0"));
  if (!a.checkpoint_artifact().empty()) {
    std::string name = a.checkpoint_artifact();
    name = name.substr(name.rfind('/') + 1);
    if (absl::Status s = CheckFileName(name, "checkpoint_artifact"); !s.ok()) return s;
  }
  for (const v1::DataArtifact& artifact : a.data_artifacts()) {
    if (absl::Status s = CheckFileName(artifact.artifact_id(), "data_artifacts.artifact_id"); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TrainerJobYaml(const v1::Assignment& assignment,
                                           const std::map<std::string, std::string>& artifact_paths) {
  auto resolve = [&](const std::string& id) -> absl::StatusOr<std::string> {
    auto it = artifact_paths.find(id);
    if (it == artifact_paths.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("artifact '", id, "' is not among the assignment's data_artifacts"));
    }
    return it->second;
  };
  absl::StatusOr<job::JobSpec> spec =
      proto::JobSpecFromProto(assignment.spec(), resolve, assignment.rank().job_id());
  if (!spec.ok()) return spec.status();
  return job::JobSpecToYaml(*spec);
}

TrainerCommand TrainerCommandFor(const v1::Assignment& a, const RankPaths& paths,
                                 const LaunchSettings& settings) {
  TrainerCommand command;
  command.env = settings.env;
  command.argv = {settings.trainer_binary,
                  "train",
                  paths.job_yaml,
                  "--rank",
                  std::to_string(a.rank().rank()),
                  "--world",
                  std::to_string(a.world_size()),
                  "--rendezvous",
                  CoordinatorRendezvousUrl(settings.coordinator, a.rendezvous_namespace()),
                  "--out",
                  paths.out_dir,
                  "--hostname",
                  settings.advertise_address};
  if (a.resume()) command.argv.push_back("--resume");
  if (a.spec().trace()) command.argv.push_back("--trace");
  if (a.spec().resources().device() == v1::DEVICE_TYPE_CUDA) {
    command.argv.insert(command.argv.end(), {"--device", "cuda"});
    command.env["CUDA_VISIBLE_DEVICES"] = std::to_string(a.slot());
  } else if (settings.threads > 0) {
    command.argv.insert(command.argv.end(), {"--threads", std::to_string(settings.threads)});
  }
  return command;
}

}  // namespace cohort::agent
