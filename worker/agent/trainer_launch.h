#pragma once

// What the agent needs to launch one rank of an assignment (docs/job-protocol.md rules 1, 8):
// where its files go, the job.yaml the trainer reads, and its command line. Pure
// functions (no I/O), callable from any thread.
//
// Work-dir layout:
//   <work_dir>/cache/<artifact_id>                 fetched data and models
//   <work_dir>/jobs/<job_id>/rank-<r>/             the trainer's --out (kept across attempts)
//   <work_dir>/jobs/<job_id>/attempt-<a>/job.yaml  the spec the trainer reads

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/v1/worker_service.pb.h"
#include "common/address.h"

namespace cohort::agent {

struct RankPaths {
  std::string out_dir;
  std::string attempt_dir;
  std::string job_yaml;
};
RankPaths PathsOf(const std::string& work_dir, const v1::RankRef& rank);

// INVALID_ARGUMENT, naming the field, for a START the agent cannot act on: a job id
// that is not a safe file name, attempt < 1, a rank outside [0, world_size), a
// rendezvous namespace other than "<job_id>/<attempt>", a checkpoint artifact or data
// artifact id that is not a safe name.
absl::Status CheckStartAssignment(const v1::Assignment& assignment);

// The YAML of the assignment's spec (proto::JobSpecFromProto, then job::JobSpecToYaml)
// with every artifact id replaced by its local path from `artifact_paths` (id -> path).
// INVALID_ARGUMENT naming the field for a spec the trainer would refuse, or an artifact
// the map lacks.
absl::StatusOr<std::string> TrainerJobYaml(const v1::Assignment& assignment,
                                           const std::map<std::string, std::string>& artifact_paths);

struct TrainerCommand {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
};

struct LaunchSettings {
  std::string trainer_binary = "/proc/self/exe";
  HostPort coordinator;
  std::string advertise_address = "127.0.0.1";
  int threads = 0;  // --threads for CPU ranks; 0: the trainer's default
  // Added to every rank's environment: the agent's credential files
  // (coordinator_store.h, SecurityEnvironment).
  std::map<std::string, std::string> env;
};

// `<trainer_binary> train <job.yaml> --rank R --world N --rendezvous
// coordinator://HOST:PORT/<ns> --out <dir> --hostname <advertise> [--resume]
// [--trace] [--threads T] [--device cuda]`, --trace when the spec asks for it; a CUDA
// rank also gets CUDA_VISIBLE_DEVICES=<slot>.
TrainerCommand TrainerCommandFor(const v1::Assignment& assignment, const RankPaths& paths,
                                 const LaunchSettings& settings);

}  // namespace cohort::agent
