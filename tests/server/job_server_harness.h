#pragma once

// A real coordinator on a loopback port, and fake agents that speak WorkerService
// through generated stubs (real agents are exercised by the integration tests).

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "cohort/v1/worker_service.grpc.pb.h"
#include "server/coordinator.h"

namespace cohort::server::testing {

class TestServer {
 public:
  // `data_dir` must exist; the options' listen and data_dir are filled in.
  TestServer(const std::string& data_dir, CoordinatorOptions options = {});
  ~TestServer();
  // A coordinator restart on the same data directory (a new port).
  void Restart();
  void Stop();

  v1::JobService::Stub& jobs() { return *jobs_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  int port() const { return coordinator_->port(); }

  v1::Job Get(const std::string& id);
  // Polls GetJob until the job is in `state` (true) or `timeout` passes (false).
  bool WaitForState(const std::string& id, v1::JobState state,
                    absl::Duration timeout = absl::Seconds(10));
  v1::Job Submit(const v1::JobSpec& spec, const std::string& key = "");
  std::vector<v1::JobEvent> Watch(const std::string& id, int64_t after = 0);

 private:
  void Connect();
  CoordinatorOptions options_;
  std::unique_ptr<Coordinator> coordinator_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
};

class FakeAgent {
 public:
  FakeAgent(std::string name, int cpu_slots) : name_(std::move(name)), slots_(cpu_slots) {}
  ~FakeAgent();

  // Register, one heartbeat with `running`, then the assignment stream (rule 2), and
  // heartbeats every 200 ms until StopHeartbeats().
  void Join(TestServer& server, const std::vector<v1::RankRef>& running = {});
  void StopHeartbeats();
  void CloseStream();

  // The next assignment received, or nullopt after `timeout`.
  std::optional<v1::Assignment> Next(absl::Duration timeout = absl::Seconds(10));

  grpc::Status Started(const v1::RankRef& rank);
  grpc::Status Exit(const v1::RankRef& rank, int code, const std::string& message = "",
                    int signal = 0);
  grpc::Status Upload(const v1::RankRef& rank, const std::string& name, const std::string& bytes);
  grpc::Status Events(const std::vector<v1::RankEvent>& events);

  v1::WorkerService::Stub& stub() { return *stub_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  int slots_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::string lease_;
  std::vector<v1::RankRef> running_;

  absl::Mutex mu_;
  std::deque<v1::Assignment> received_ ABSL_GUARDED_BY(mu_);
  bool heartbeats_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<grpc::ClientContext> stream_context_;
  std::thread stream_;
  std::thread heartbeat_;
};

v1::RankRef Rank(const std::string& job_id, int attempt, int rank);

// The agent's next assignment, which must come within `timeout` and be `action`.
v1::Assignment Expect(FakeAgent& agent, v1::AssignmentAction action,
                      absl::Duration timeout = absl::Seconds(10));

}  // namespace cohort::server::testing
