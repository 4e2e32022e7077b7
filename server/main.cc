// cohort-server: the coordinator. See server/coordinator.h.

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/address.h"
#include "common/duration.h"
#include "common/logging.h"
#include "common/signals.h"
#include "common/version.h"
#include "proto/grpc_logging.h"
#include "server/coordinator.h"

namespace {

// "1024", "512K", "64M", "16G" (powers of 1024) -> bytes.
absl::StatusOr<int64_t> ParseBytes(const std::string& text, const char* flag) {
  int64_t scale = 1;
  std::string digits = text;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K': case 'k': scale = int64_t{1} << 10; break;
      case 'M': case 'm': scale = int64_t{1} << 20; break;
      case 'G': case 'g': scale = int64_t{1} << 30; break;
      default: break;
    }
    if (scale != 1) digits.pop_back();
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(digits, &value) || value <= 0 || value > INT64_MAX / scale) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": '", text, "' is not a positive size (bytes, or with a K, M or G suffix)"));
  }
  return value * scale;
}

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
  std::string log_format = "text";
  std::string metrics_listen;
  std::string max_upload_bytes = "16G";
  std::string max_model_bytes = "2G";
  int64_t max_queued_jobs = 10000;
  cohort::server::JobLimits limits;
  std::vector<std::string> allowed_data_roots;
  std::string start_timeout = "120s";
  app.add_option("--listen", listen, "HOST:PORT to serve gRPC on (port 0: pick a free one)")
      ->capture_default_str();
  app.add_option("--data-dir", data_dir, "directory for the database and artifacts")->required();
  app.add_option("--lease-ttl", lease_ttl, "a worker is lost after this long without a heartbeat")
      ->capture_default_str();
  app.add_option("--shutdown-grace", shutdown_grace,
                 "how long in-flight calls may take to finish at shutdown")
      ->capture_default_str();
  app.add_option("--max-upload-bytes", max_upload_bytes,
                 "largest data upload (.npy/.npz) or job artifact, e.g. 16G")
      ->capture_default_str();
  app.add_option("--max-model-bytes", max_model_bytes,
                 "largest model file (.keras/.json), uploaded or sent with a job")
      ->capture_default_str();
  app.add_option("--max-model-layers", limits.model.max_layers, "most layers a model may list")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-model-parameters", limits.model.max_parameters,
                 "most parameters (weights) a model may have")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-layer-output-elements", limits.model.max_activation_elements,
                 "most elements one layer may output for one sample")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-step-activation-elements", limits.max_step_activation_elements,
                 "most activation elements one training step may keep on one rank "
                 "(all layers' outputs times the per-rank batch)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--allowed-data-root", allowed_data_roots,
                 "a folder job specs may name model and data paths in (repeatable); none: any "
                 "absolute path the server can read");
  app.add_option("--max-queued-jobs", max_queued_jobs,
                 "refuse submits while this many jobs are queued or running")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--start-timeout", start_timeout,
                 "fail an attempt whose ranks have not all started within this long")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();
  app.add_option("--log-format", log_format, "text, or json (one object per line)")
      ->capture_default_str();
  app.add_option("--metrics-listen", metrics_listen,
                 "HOST:PORT to serve Prometheus metrics on (GET /metrics); off when empty");
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
  absl::StatusOr<int64_t> upload = ParseBytes(max_upload_bytes, "--max-upload-bytes");
  if (!upload.ok()) return Fail(upload.status());
  options.artifacts.max_upload_bytes = *upload;
  absl::StatusOr<int64_t> model = ParseBytes(max_model_bytes, "--max-model-bytes");
  if (!model.ok()) return Fail(model.status());
  options.artifacts.max_model_bytes = *model;
  options.max_queued_jobs = max_queued_jobs;
  absl::StatusOr<cohort::PathRoots> roots =
      cohort::PathRoots::Create(allowed_data_roots, "--allowed-data-root");
  if (!roots.ok()) return Fail(roots.status());
  limits.data_roots = *std::move(roots);
  options.limits = std::move(limits);
  absl::StatusOr<absl::Duration> start =
      cohort::ParsePositiveDuration(start_timeout, "--start-timeout");
  if (!start.ok()) return Fail(start.status());
  options.start_timeout = *start;
  if (!metrics_listen.empty()) {
    absl::StatusOr<cohort::HostPort> m = cohort::ParseHostPort(metrics_listen, /*allow_port_zero=*/true);
    if (!m.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--metrics-listen: ", m.status().message())));
    options.metrics_listen = *m;
  }
  absl::StatusOr<cohort::LogFormat> format = cohort::ParseLogFormat(log_format);
  if (!format.ok()) return Fail(format.status());
  if (absl::Status s = cohort::InitLogging("server", log_level, *format); !s.ok()) return Fail(s);
  cohort::RouteGrpcLogsToSpdlog();

  cohort::server::Coordinator coordinator(options);
  if (absl::Status s = coordinator.Start(); !s.ok()) return Fail(s);
  int sig = cohort::WaitForTerminationSignal();
  spdlog::info("received signal {}", sig);
  coordinator.Shutdown();
  return 0;
}
