// cohort-server: the coordinator. See server/coordinator.h.

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "common/address.h"
#include "common/duration.h"
#include "common/logging.h"
#include "common/signals.h"
#include "common/version.h"
#include "server/coordinator.h"

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "cohort-server: error: %s\n", std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  cohort::BlockTerminationSignals();

  CLI::App app{"cohort-server: the Cohort coordinator (job API, scheduler, worker registry)"};
  std::string listen = "127.0.0.1:7070";
  std::string data_dir;
  std::string lease_ttl = "10s";
  std::string shutdown_grace = "10s";
  std::string log_level = "info";
  app.add_option("--listen", listen, "HOST:PORT to serve gRPC on (port 0: pick a free one)")
      ->capture_default_str();
  app.add_option("--data-dir", data_dir, "directory for the database and artifacts")->required();
  app.add_option("--lease-ttl", lease_ttl, "a worker is lost after this long without a heartbeat")
      ->capture_default_str();
  app.add_option("--shutdown-grace", shutdown_grace,
                 "how long in-flight calls may take to finish at shutdown")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();
  app.set_version_flag("--version", cohort::kVersion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  cohort::server::CoordinatorOptions options;
  absl::StatusOr<cohort::HostPort> address = cohort::ParseHostPort(listen, /*allow_port_zero=*/true);
  if (!address.ok()) return Fail(address.status());
  options.listen = *address;
  options.data_dir = data_dir;
  absl::StatusOr<absl::Duration> ttl = cohort::ParsePositiveDuration(lease_ttl, "--lease-ttl");
  if (!ttl.ok()) return Fail(ttl.status());
  options.lease_ttl = *ttl;
  absl::StatusOr<absl::Duration> grace =
      cohort::ParsePositiveDuration(shutdown_grace, "--shutdown-grace");
  if (!grace.ok()) return Fail(grace.status());
  options.shutdown_grace = *grace;
  if (absl::Status s = cohort::InitLogging("server", log_level); !s.ok()) return Fail(s);

  cohort::server::Coordinator coordinator(options);
  if (absl::Status s = coordinator.Start(); !s.ok()) return Fail(s);
  int sig = cohort::WaitForTerminationSignal();
  spdlog::info("received signal {}", sig);
  coordinator.Shutdown();
  return 0;
}
