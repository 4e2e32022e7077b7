// cohort-server: the coordinator. See server/coordinator.h.

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/address.h"
#include "common/duration.h"
#include "common/logging.h"
#include "common/signals.h"
#include "common/version.h"
#include "proto/channel.h"
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

// Reads the files the security flags name (docs/security.md).
absl::Status LoadSecurity(const std::string& token_file, const std::string& tls_cert,
                          const std::string& tls_key, const std::string& tls_client_ca,
                          bool insecure, cohort::server::CoordinatorSecurity* out) {
  out->insecure = insecure;
  if (!token_file.empty()) {
    absl::StatusOr<cohort::server::TokenTable> tokens = cohort::server::TokenTable::Load(token_file);
    if (!tokens.ok()) return tokens.status();
    out->tokens = *std::move(tokens);
  }
  if (tls_cert.empty() != tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both or neither");
  }
  struct File {
    const std::string& path;
    const char* flag;
    const char* marker;  // what a PEM file of this kind holds
    std::string* contents;
  };
  for (const File& f : {File{tls_cert, "--tls-cert", "-----BEGIN CERTIFICATE-----", &out->tls_cert_pem},
                        File{tls_key, "--tls-key", "PRIVATE KEY-----", &out->tls_key_pem},
                        File{tls_client_ca, "--tls-client-ca", "-----BEGIN CERTIFICATE-----",
                             &out->tls_client_ca_pem}}) {
    if (f.path.empty()) continue;
    absl::StatusOr<std::string> pem = cohort::ReadSecurityFile(f.path, f.flag);
    if (!pem.ok()) return pem.status();
    if (!absl::StrContains(*pem, f.marker)) {
      return absl::InvalidArgumentError(
          absl::StrCat(f.flag, " ", f.path, ": not a PEM file (no '", f.marker, "')"));
    }
    *f.contents = *std::move(pem);
  }
  return absl::OkStatus();
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "cohort-server: error: %s\n", std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  cohort::CatchTerminationSignals();

  CLI::App app{"cohort-server: the Cohort coordinator (job API, scheduler, worker registry)"};
  std::string listen = "127.0.0.1:7070";
  std::string data_dir;
  std::string lease_ttl = "10s";
  std::string shutdown_grace = "10s";
  std::string log_level = "info";
  std::string log_format = "text";
  std::string metrics_listen;
  std::string health_listen;
  std::string max_upload_bytes = "16G";
  std::string max_model_bytes = "2G";
  int64_t max_queued_jobs = 10000;
  cohort::server::JobLimits limits;
  std::vector<std::string> allowed_data_roots;
  std::string start_timeout = "120s";
  int64_t max_queued_jobs_per_user = 0;
  int64_t max_watches = 1000;
  std::string max_upload_bytes_per_user = "0";
  std::string token_file, tls_cert, tls_key, tls_client_ca;
  bool insecure = false;
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
  app.add_option("--max-watches", max_watches,
                 "most WatchJob streams open at once (each holds a server thread)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-queued-jobs-per-user", max_queued_jobs_per_user,
                 "refuse a user's submits while this many of its jobs are queued or running; 0: no limit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-upload-bytes-per-user", max_upload_bytes_per_user,
                 "most bytes of data and models one user may upload, e.g. 100G; 0: no limit")
      ->capture_default_str();
  // docs/security.md
  app.add_option("--token-file", token_file,
                 "the tokens that may call, one 'TOKEN|sha256:HEX IDENTITY user|admin|worker' a line; "
                 "none: no authentication")
      ->group("Security");
  app.add_option("--tls-cert", tls_cert, "PEM certificate (chain) of the gRPC port: serve TLS")
      ->group("Security");
  app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert")->group("Security");
  app.add_option("--tls-client-ca", tls_client_ca,
                 "PEM CA that signs agents' client certificates: agents must present one (mutual TLS)")
      ->group("Security");
  app.add_option("--health-listen", health_listen,
                 "HOST:PORT to serve grpc.health.v1 alone on, in plaintext (for probes that "
                 "cannot speak TLS); off when empty")
      ->group("Security");
  app.add_flag("--insecure", insecure,
               "allow a non-loopback --listen without --token-file and TLS")
      ->group("Security");
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
  options.max_queued_jobs_per_user = max_queued_jobs_per_user;
  options.max_watches = max_watches;
  if (max_upload_bytes_per_user != "0") {
    absl::StatusOr<int64_t> per_user = ParseBytes(max_upload_bytes_per_user, "--max-upload-bytes-per-user");
    if (!per_user.ok()) return Fail(per_user.status());
    options.max_upload_bytes_per_user = *per_user;
  }
  if (absl::Status s = LoadSecurity(token_file, tls_cert, tls_key, tls_client_ca, insecure,
                                    &options.security);
      !s.ok()) {
    return Fail(s);
  }
  absl::StatusOr<cohort::PathRoots> roots =
      cohort::PathRoots::Create(allowed_data_roots, "--allowed-data-root");
  if (!roots.ok()) return Fail(roots.status());
  limits.data_roots = *std::move(roots);
  options.limits = std::move(limits);
  absl::StatusOr<absl::Duration> start =
      cohort::ParsePositiveDuration(start_timeout, "--start-timeout");
  if (!start.ok()) return Fail(start.status());
  options.start_timeout = *start;
  if (!health_listen.empty()) {
    absl::StatusOr<cohort::HostPort> h = cohort::ParseHostPort(health_listen, /*allow_port_zero=*/true);
    if (!h.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--health-listen: ", h.status().message())));
    options.health_listen = *h;
  }
  if (!metrics_listen.empty()) {
    absl::StatusOr<cohort::HostPort> m = cohort::ParseHostPort(metrics_listen, /*allow_port_zero=*/true);
    if (!m.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--metrics-listen: ", m.status().message())));
    options.metrics_listen = *m;
  }
  absl::StatusOr<cohort::LogFormat> format = cohort::ParseLogFormat(log_format);
  if (!format.ok()) return Fail(format.status());
  if (absl::Status s = cohort::InitLogging("server", log_level, *format); !s.ok()) return Fail(s);
  cohort::RouteGrpcLogsToSpdlog();

  if (options.security.insecure) {
    spdlog::warn("--insecure: serving {} without the checks of docs/security.md", listen);
  }
  cohort::server::Coordinator coordinator(options);
  if (absl::Status s = coordinator.Start(); !s.ok()) return Fail(s);
  int sig = cohort::WaitForTerminationSignal();
  spdlog::info("received signal {}", sig);
  coordinator.Shutdown();
  return 0;
}
