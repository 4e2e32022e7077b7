#pragma once

// A local Cohort cluster for integration tests: a real cohort-server on a free loopback
// port with its data dir in a TempDir, real cohort-worker agents, and the real `cohort`
// client to look at it. Every process is stopped when the Cluster is destroyed.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {

class Cluster {
 public:
  // `lease_ttl` is passed to the coordinator ("1s" keeps tests quick).
  explicit Cluster(std::string lease_ttl = "1s");

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const TempDir& dir() const { return dir_; }

  // Starts the coordinator and waits until it answers; false if it did not.
  bool StartServer();
  Process& server() { return *server_; }
  // SIGTERM, then waits for a clean exit; returns its exit status.
  ExitStatus StopServer();

  // Starts an agent named `name` offering `slots` CPU slots.
  Process& StartWorker(const std::string& name, int slots = 1);
  Process& worker(const std::string& name) { return *workers_.at(name); }

  // Runs `cohort --coordinator ADDR args...`.
  CommandResult Cli(std::vector<std::string> args);
  // `cohort workers -o json`, parsed; name -> worker object. Empty on failure.
  std::map<std::string, nlohmann::json> Workers();
  // Waits until `name` has `state` in `cohort workers -o json`.
  bool WaitForWorkerState(const std::string& name, const std::string& state,
                          absl::Duration timeout = absl::Seconds(20));

 private:
  TempDir dir_;
  std::string lease_ttl_;
  int port_;
  int server_starts_ = 0;
  std::unique_ptr<Process> server_;
  std::map<std::string, std::unique_ptr<Process>> workers_;
};

}  // namespace cohort::testing
