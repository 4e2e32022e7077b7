#pragma once

// FakeCoordinator: an in-process gRPC server on a free loopback port that plays the
// coordinator's part the agent talks to (WorkerService, and JobService's
// DownloadArtifact), recording what it is told. Enough protocol for the agent's unit
// tests; the real coordinator is tested against the real agent in tests/integration.

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/server.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "cohort/v1/worker_service.grpc.pb.h"

namespace cohort::testing {

class FakeCoordinator {
 public:
  // Listens on `port` (0: a free one).
  explicit FakeCoordinator(int port = 0);
  ~FakeCoordinator();

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  std::unique_ptr<v1::WorkerService::Stub> WorkerStub() const;
  std::unique_ptr<v1::JobService::Stub> JobStub() const;

  struct State {
    std::map<std::string, std::string> data;      // FetchData: id -> bytes
    std::map<std::string, int> fetches;           // FetchData calls per id
    std::map<std::string, std::string> uploads;   // UploadArtifact: name -> bytes
    std::map<std::string, std::string> job_artifacts;  // DownloadArtifact: "job/name" -> bytes
    std::map<std::string, std::string> keys;      // rendezvous "ns/key" -> value
    std::set<std::string> open_namespaces;        // others answer ABORTED
    std::vector<v1::RankEvent> events;
    std::vector<v1::ReportExitRequest> exits;
    std::vector<v1::HeartbeatRequest> heartbeats;
    std::deque<v1::Assignment> to_send;           // StreamAssignments
    int registers = 0;
    int streams_opened = 0;
    int event_streams_ended = 0;                  // ReportEvents calls returned
    int report_exit_failures = 0;                 // answer UNAVAILABLE this many times
    std::set<std::string> forgotten_leases;       // Heartbeat/StreamAssignments: NOT_FOUND
    std::vector<size_t> uploads_at_exit;          // uploads.size() at each recorded exit
  };

  // Runs `f` on the state under the lock.
  template <typename F>
  auto With(F f) {
    absl::MutexLock lock(&mu_);
    return f(state_);
  }
  bool WaitFor(const std::function<bool(const State&)>& condition,
               absl::Duration timeout = absl::Seconds(20));

 private:
  class WorkerImpl;
  class JobImpl;
  friend class WorkerImpl;
  friend class JobImpl;

  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<WorkerImpl> worker_;
  std::unique_ptr<JobImpl> jobs_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace cohort::testing
