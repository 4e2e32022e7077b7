#pragma once

// `cohort download JOB`: fetches a job's artifacts (JobService.DownloadArtifact) into a
// directory.
//
// An artifact the job lacks (model.keras of a job still running) is named on stderr and
// makes the exit code 1, but the others are still fetched: `cohort download` of a
// running job brings its TensorBoard curves so far.
//
// A file appears at its path complete and checked, or not at all: bytes go to
// "<path>.part", and only when the size and the SHA-256 match what the coordinator
// lists for the artifact (Job.artifacts) is it renamed into place. A ".part" left by a
// broken download is resumed from its length (DownloadArtifactRequest.offset), by a
// retry within the command or by running the command again. A file already there with
// the right digest is not fetched again.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/call.h"
#include "cohort/v1/job_service.grpc.pb.h"

namespace cohort::client {

struct DownloadOptions {
  std::string job_id;
  std::string out_dir = ".";
  // Artifact names, or folders ending in '/' ("tensorboard/": every artifact under
  // it); empty: "model.keras", "history.json" and the tensorboard/ files.
  std::vector<std::string> names;
};

// Returns the exit code; prints one line per file written.
int RunDownloadCommand(const Connection& connection, const DownloadOptions& options);

// Downloads one artifact to `target` as described above. Returns the bytes fetched
// now, or -1 when the file was already there with the right digest.
absl::StatusOr<int64_t> DownloadArtifact(v1::JobService::Stub& stub, const std::string& job_id,
                                         const v1::ArtifactInfo& artifact,
                                         const std::string& target);

}  // namespace cohort::client
