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

// How an agent is started beyond its name and slots.
struct WorkerOptions {
  int slots = 1;
  std::map<std::string, std::string> env;  // added to the agent's (and its trainers') environment
  std::vector<std::string> wrapper;        // run through this (e.g. ip netns exec NS)
  std::vector<std::string> extra_args;     // more cohort-worker flags
};

class Cluster {
 public:
  // `lease_ttl` is passed to the coordinator ("1s" keeps tests quick); it listens on
  // `host` (a loopback address unless a test gives it another of this machine's).
  explicit Cluster(std::string lease_ttl = "1s", std::string host = "127.0.0.1");

  std::string address() const { return host_ + ":" + std::to_string(port_); }
  const TempDir& dir() const { return dir_; }
  // The coordinator's --data-dir.
  std::string data_dir() const { return dir_.File("data"); }
  // More cohort-server flags, for the next StartServer.
  void set_server_args(std::vector<std::string> args) { server_args_ = std::move(args); }

  // Starts the coordinator and waits until it answers; false if it did not.
  bool StartServer();
  Process& server() { return *server_; }
  // SIGTERM, then waits for a clean exit; returns its exit status.
  ExitStatus StopServer();

  // Starts an agent named `name` offering `slots` CPU slots, with its --work-dir in
  // dir() (work-<name>), so agents of different tests never share files.
  Process& StartWorker(const std::string& name, int slots = 1);
  Process& StartWorker(const std::string& name, const WorkerOptions& options);
  Process& worker(const std::string& name) { return *workers_.at(name); }

  // Flags every Cli() call gets before its own (--token, --tls-ca, ...).
  void set_client_args(std::vector<std::string> args) { client_args_ = std::move(args); }
  // Runs `cohort --coordinator ADDR <client args> args...`.
  CommandResult Cli(std::vector<std::string> args);
  // `cohort workers -o json`, parsed; name -> worker object. Empty on failure.
  std::map<std::string, nlohmann::json> Workers();
  // Waits until `name` has `state` in `cohort workers -o json`.
  bool WaitForWorkerState(const std::string& name, const std::string& state,
                          absl::Duration timeout = absl::Seconds(20));

 private:
  TempDir dir_;
  std::string lease_ttl_;
  std::string host_;
  int port_;
  std::vector<std::string> server_args_;
  std::vector<std::string> client_args_;
  int server_starts_ = 0;
  std::unique_ptr<Process> server_;
  std::map<std::string, std::unique_ptr<Process>> workers_;
};

}  // namespace cohort::testing
