// cohort-worker: the node agent. See worker/agent/agent.h.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/address.h"
#include "common/duration.h"
#include "common/logging.h"
#include "common/names.h"
#include "common/signals.h"
#include "common/version.h"
#include "proto/channel.h"
#include "proto/grpc_logging.h"
#include "worker/agent/agent.h"
#include "worker/agent/coordinator_store.h"
#include "worker/agent/pod_environment.h"
#include "worker/trainer/devices.h"
#include "worker/trainer/commands.h"
#include "worker/trainer/cpu_threads.h"

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "cohort-worker: error: %s\n", std::string(status.message()).c_str());
  return 1;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "worker";
  return name;
}

// --rendezvous for `train`: the coordinator's store under the agent, a shared directory
// for standalone runs.
absl::StatusOr<std::unique_ptr<cohort::trainer::collective::Store>> OpenStore(absl::string_view url) {
  if (cohort::agent::IsCoordinatorRendezvous(url)) {
    // The agent's credentials, by the paths it passed (coordinator_store.h).
    absl::StatusOr<cohort::ChannelSecurity> security =
        cohort::LoadChannelSecurity(cohort::agent::SecurityFilesFromEnvironment());
    if (!security.ok()) return security.status();
    absl::StatusOr<std::unique_ptr<cohort::agent::CoordinatorStore>> store =
        cohort::agent::CoordinatorStore::Open(url, {}, *security);
    if (!store.ok()) return store.status();
    return std::unique_ptr<cohort::trainer::collective::Store>(std::move(*store));
  }
  if (absl::StartsWith(url, "file://")) return cohort::trainer::OpenFileStore(url);
  return absl::InvalidArgumentError(absl::StrCat(
      "--rendezvous: '", url, "' is neither file://DIR nor coordinator://HOST:PORT/JOB_ID/ATTEMPT"));
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything else: OpenBLAS chose its kernels when it loaded, and only a new
  // process image loads it again (worker/trainer/cpu_threads.h).
  if (std::optional<std::string> core = cohort::trainer::OpenBlasCoreTypeToSet()) {
    setenv("OPENBLAS_CORETYPE", core->c_str(), 1);
    execv("/proc/self/exe", argv);
    std::fprintf(stderr, "cohort-worker: could not restart with OPENBLAS_CORETYPE=%s (%s); "
                 "LibTorch's matrix products run on OpenBLAS' %s kernels\n",
                 core->c_str(), std::strerror(errno), cohort::trainer::OpenBlasCore().c_str());
  }
  CLI::App app{"cohort-worker: the Cohort node agent (and, with `train`, one rank of a job)"};
  const char* env_coordinator = std::getenv("COHORT_COORDINATOR");
  std::string coordinator = env_coordinator ? env_coordinator : "";
  // In a Kubernetes pod: NODE_NAME, POD_IP and the GPUs the device plugin gave it are the
  // defaults that flags override (worker/agent/pod_environment.h).
  const cohort::agent::PodDefaults pod = cohort::agent::PodDefaultsFrom(
      cohort::agent::ProcessEnvironment(), cohort::agent::DeviceNames());
  std::string name = pod.name.value_or(HostName());
  int slots = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string advertise = pod.advertise_address.value_or("");
  std::string log_level = "info";
  std::string log_format = "text";
  std::string metrics_listen;
  std::string health_listen;
  std::string work_dir;
  std::string stop_grace = "10s";
  app.add_option("--coordinator", coordinator, "coordinator HOST:PORT (env COHORT_COORDINATOR)");
  app.add_option("--name", name, "worker name, unique in the cluster")->capture_default_str();
  app.add_option("--slots", slots, "CPU slots (ranks) this worker offers")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--advertise-address", advertise,
                 "address other workers reach this one at (default: the local address that "
                 "routes to the coordinator)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();
  app.add_option("--log-format", log_format, "text, or json (one object per line)")
      ->capture_default_str();
  app.add_option("--metrics-listen", metrics_listen,
                 "HOST:PORT to serve Prometheus metrics on (GET /metrics); off when empty");
  app.add_option("--health-listen", health_listen,
                 "HOST:PORT to serve grpc.health.v1 on for probes (\"\": registered with the "
                 "coordinator, \"liveness\": running); off when empty");
  app.add_option("--work-dir", work_dir,
                 "data cache and the trainers' outputs (default /tmp/cohort-worker-<name>)");
  app.add_option("--stop-grace", stop_grace,
                 "how long a stopped trainer gets after SIGTERM before SIGKILL")
      ->capture_default_str();
  app.set_version_flag("--version", cohort::kVersion);
  app.require_subcommand(0, 1);
  cohort::trainer::TrainCommand train;
  CLI::App* train_app = cohort::trainer::AddTrainCommand(app, train);
  // docs/security.md: the worker token and TLS files; the environment variables are
  // also how the agent hands them to its trainers.
  cohort::ChannelSecurityFiles security = cohort::agent::SecurityFilesFromEnvironment();
  app.add_option("--token-file", security.token_file,
                 "a file holding this agent's worker token on its first line (env COHORT_TOKEN_FILE)")
      ->group("Security");
  app.add_option("--tls-ca", security.tls_ca,
                 "PEM CA of the coordinator's certificate: connect with TLS (env COHORT_TLS_CA)")
      ->group("Security");
  app.add_option("--tls-cert", security.tls_cert,
                 "PEM client certificate, for a coordinator with --tls-client-ca (env COHORT_TLS_CERT)")
      ->group("Security");
  app.add_option("--tls-key", security.tls_key, "PEM private key of --tls-cert (env COHORT_TLS_KEY)")
      ->group("Security");
  app.add_option("--tls-server-name", security.tls_server_name,
                 "the name the coordinator's certificate carries, when not the --coordinator host "
                 "(env COHORT_TLS_SERVER_NAME)")
      ->group("Security");
  cohort::trainer::PredictCommand predict;
  CLI::App* predict_app = cohort::trainer::AddPredictCommand(app, predict);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (train_app->parsed()) return cohort::trainer::RunTrainCommand(train, OpenStore);
  if (predict_app->parsed()) return cohort::trainer::RunPredictCommand(predict);
  // Only the agent catches SIGTERM/SIGINT (to stop its ranks and deregister); train
  // and predict keep the default action and stop at once.
  cohort::CatchTerminationSignals();
  if (coordinator.empty()) {
    std::fprintf(stderr, "cohort-worker: error: --coordinator (or COHORT_COORDINATOR) is required\n");
    return 2;
  }
  absl::StatusOr<cohort::HostPort> address = cohort::ParseHostPort(coordinator);
  if (!address.ok()) return Fail(address.status());
  if (absl::Status s = cohort::CheckName(name, "--name"); !s.ok()) return Fail(s);
  absl::StatusOr<absl::Duration> grace = cohort::ParsePositiveDuration(stop_grace, "--stop-grace");
  if (!grace.ok()) {
    std::fprintf(stderr, "cohort-worker: error: %s\n", std::string(grace.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<cohort::LogFormat> format = cohort::ParseLogFormat(log_format);
  if (!format.ok()) return Fail(format.status());
  if (absl::Status s = cohort::InitLogging("agent", log_level, *format); !s.ok()) return Fail(s);
  cohort::RouteGrpcLogsToSpdlog();
  std::unique_ptr<cohort::agent::AgentMetrics> metrics;
  if (!metrics_listen.empty()) {
    absl::StatusOr<cohort::HostPort> m = cohort::ParseHostPort(metrics_listen, /*allow_port_zero=*/true);
    if (!m.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--metrics-listen: ", m.status().message())));
    absl::StatusOr<std::unique_ptr<cohort::agent::AgentMetrics>> listening =
        cohort::agent::AgentMetrics::Listen(*m);
    if (!listening.ok()) return Fail(listening.status());
    metrics = std::move(*listening);
  }
  std::unique_ptr<cohort::agent::HealthServer> health;
  if (!health_listen.empty()) {
    absl::StatusOr<cohort::HostPort> h = cohort::ParseHostPort(health_listen, /*allow_port_zero=*/true);
    if (!h.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--health-listen: ", h.status().message())));
    absl::StatusOr<std::unique_ptr<cohort::agent::HealthServer>> listening =
        cohort::agent::HealthServer::Listen(*h);
    if (!listening.ok()) return Fail(listening.status());
    health = std::move(*listening);
  }
  for (const std::string& note : pod.notes) spdlog::info("pod: {}", note);
  for (const std::string& warning : pod.warnings) spdlog::warn("pod: {}", warning);

  // Trainers may start in another directory: they get absolute paths.
  for (std::string* path : {&security.token_file, &security.tls_ca, &security.tls_cert, &security.tls_key}) {
    if (!path->empty()) *path = std::filesystem::absolute(*path).string();
  }
  absl::StatusOr<cohort::ChannelSecurity> loaded = cohort::LoadChannelSecurity(security);
  if (!loaded.ok()) return Fail(loaded.status());

  cohort::agent::AgentOptions options;
  options.coordinator = *address;
  options.security = *std::move(loaded);
  options.security_files = security;
  options.name = name;
  options.cpu_slots = slots;
  options.work_dir = work_dir;
  options.stop_grace = *grace;
  options.metrics = metrics.get();
  options.health = health.get();
  options.advertise_address =
      advertise.empty() ? cohort::agent::LocalAddressToward(*address) : advertise;
  for (const auto& gpu : cohort::trainer::CudaDevices()) {
    cohort::v1::GpuInfo info;
    info.set_index(gpu.index);
    info.set_name(gpu.name);
    info.set_memory_bytes(gpu.memory_bytes);
    options.gpus.push_back(info);
  }
  std::string gpu_warning;
  options.gpus.resize(
      cohort::agent::GpusToAdvertise(static_cast<int>(options.gpus.size()), pod, &gpu_warning));
  if (!gpu_warning.empty()) spdlog::warn("pod: {}", gpu_warning);
  spdlog::info("cohort-worker {} ({}), {} GPUs", cohort::kVersion,
               cohort::trainer::TorchDescription(), options.gpus.size());

  cohort::agent::Agent agent(options);
  // The signal thread only ever stops the agent; it is detached because a fatal agent
  // error ends the process while it still waits.
  std::thread([&agent] {
    int sig = cohort::WaitForTerminationSignal();
    spdlog::info("received signal {}", sig);
    agent.Stop();
  }).detach();
  absl::Status status = agent.Run();
  if (!status.ok()) return Fail(status);
  spdlog::info("stopped");
  return 0;
}
