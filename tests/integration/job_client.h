#pragma once

// JobService from a test: jobs submitted from YAML files, their state and events read
// back through the generated stub, on a real coordinator (tests/integration/cluster.h).
// Failures are Catch2 REQUIREs, so a test reads as the steps a user takes.

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "proto/channel.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {

// A digits job on the data of DigitsData.
struct DigitsJob {
  std::string name = "digits";
  int workers = 2;
  int epochs = 2;
  int batch_size = 64;
  int priority = 0;
  int max_restarts = 3;
  int every_epochs = 1;
};

// The YAML of `job` on the data in `data_dir`, with examples/digits_cnn.keras.
std::string DigitsJobYaml(const DigitsJob& job, const std::string& data_dir);

// examples/make_digits.py's arrays in a directory of the test's own (REQUIREs success).
class DigitsData {
 public:
  DigitsData();
  const std::string& dir() const { return dir_.path(); }
  std::string File(const std::string& name) const { return dir_.File(name); }
  // Writes the YAML of `job` beside the data and returns its path.
  std::string Write(const DigitsJob& job) const;

 private:
  TempDir dir_;
};

class JobClient {
 public:
  // `security`: the token and TLS settings of the calls (proto/channel.h).
  explicit JobClient(const std::string& address, const ChannelSecurity& security = {});

  // Submits the job spec file `yaml_path`; REQUIREs success and returns the job id.
  std::string Submit(const std::string& yaml_path);
  v1::Job Get(const std::string& id);
  // Polls until the job is in `state` (REQUIREd), or fails the test after `timeout`
  // with the job as it was; returns the job.
  v1::Job WaitForState(const std::string& id, v1::JobState state,
                       absl::Duration timeout = absl::Seconds(240));
  // Polls until `done(job)` holds; false after `timeout`.
  bool WaitFor(const std::string& id, const std::function<bool(const v1::Job&)>& done,
               absl::Duration timeout);
  // Every stored event, through WatchJob from the start; the stream must end (the job
  // is final) within `timeout`.
  std::vector<v1::JobEvent> Events(const std::string& id,
                                   absl::Duration timeout = absl::Seconds(30));
  grpc::Status Cancel(const std::string& id, v1::Job* job = nullptr);

 private:
  std::unique_ptr<v1::JobService::Stub> stub_;
};

// "JOB_STATE_RUNNING" for messages.
std::string StateName(v1::JobState state);

// The worker that runs `rank` in the job's current attempt ("" if none).
std::string WorkerOfRank(const v1::Job& job, int rank);
// Whether the job has an artifact whose name starts with `prefix`.
bool HasArtifact(const v1::Job& job, absl::string_view prefix);
// REQUIREs that event sequence numbers run 1, 2, ... without a gap, and CHECKs that the
// last event is the one that made the job `final_state`.
void CheckNothingLost(const std::vector<v1::JobEvent>& events, v1::JobState final_state);
// The epochs that ended (EpochEnd events), of `attempt` or (0) of every attempt.
std::set<int> EndedEpochs(const std::vector<v1::JobEvent>& events, int attempt = 0);

}  // namespace cohort::testing
