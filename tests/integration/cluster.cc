#include "tests/integration/cluster.h"

#include <signal.h>

#include "tests/support/ports.h"

namespace cohort::testing {

Cluster::Cluster(std::string lease_ttl, std::string host)
    : lease_ttl_(std::move(lease_ttl)), host_(std::move(host)), port_(FreePort()) {}

bool Cluster::StartServer() {
  std::string log = dir_.File("server-" + std::to_string(server_starts_++) + ".log");
  std::vector<std::string> argv{COHORT_SERVER_BIN, "--listen", address(), "--data-dir",
                                data_dir(), "--lease-ttl", lease_ttl_, "--shutdown-grace", "3s"};
  argv.insert(argv.end(), server_args_.begin(), server_args_.end());
  server_ = std::make_unique<Process>(argv, log);
  return WaitUntil([&] { return !server_->Running() ? true : Cli({"workers"}).status.code == 0; },
                   absl::Seconds(20)) &&
         server_->Running();
}

ExitStatus Cluster::StopServer() {
  server_->Signal(SIGTERM);
  auto status = server_->Wait(absl::Seconds(30));
  return status.value_or(ExitStatus{});
}

Process& Cluster::StartWorker(const std::string& name, int slots) {
  WorkerOptions options;
  options.slots = slots;
  return StartWorker(name, options);
}

Process& Cluster::StartWorker(const std::string& name, const WorkerOptions& options) {
  std::vector<std::string> argv = options.wrapper;
  argv.insert(argv.end(), {COHORT_WORKER_BIN, "--coordinator", address(), "--name", name,
                           "--slots", std::to_string(options.slots), "--work-dir",
                           dir_.File("work-" + name)});
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
  auto p = std::make_unique<Process>(argv, dir_.File("worker-" + name + ".log"), options.env);
  Process& ref = *p;
  workers_[name] = std::move(p);
  return ref;
}

CommandResult Cluster::Cli(std::vector<std::string> args) {
  std::vector<std::string> argv{COHORT_CLIENT_BIN, "--coordinator", address()};
  argv.insert(argv.end(), client_args_.begin(), client_args_.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, absl::Seconds(30));
}

std::map<std::string, nlohmann::json> Cluster::Workers() {
  std::map<std::string, nlohmann::json> out;
  CommandResult r = Cli({"workers", "-o", "json"});
  if (r.status.code != 0) return out;
  nlohmann::json list = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array()) return out;
  for (auto& w : list) out[w.value("name", "")] = w;
  return out;
}

bool Cluster::WaitForWorkerState(const std::string& name, const std::string& state,
                                 absl::Duration timeout) {
  return WaitUntil(
      [&] {
        auto workers = Workers();
        auto it = workers.find(name);
        return it != workers.end() && it->second.value("state", "") == state;
      },
      timeout);
}

}  // namespace cohort::testing
