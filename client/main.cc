// cohort: the command-line client. docs/cli.md describes every command.

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>

#include "client/call.h"
#include "client/exit_codes.h"
#include "client/workers_command.h"
#include "common/address.h"
#include "common/duration.h"
#include "common/version.h"

int main(int argc, char** argv) {
  using namespace cohort::client;
  CLI::App app{"cohort: submit, watch and manage Cohort training jobs"};
  app.require_subcommand(1);
  const char* env = std::getenv("COHORT_COORDINATOR");
  std::string coordinator = env && *env ? env : "127.0.0.1:7070";
  std::string timeout = "5s";
  app.add_option("--coordinator", coordinator, "coordinator HOST:PORT (env COHORT_COORDINATOR)")
      ->capture_default_str();
  app.add_option("--timeout", timeout, "deadline of each call to the coordinator")
      ->capture_default_str();

  CLI::App* version = app.add_subcommand("version", "print the client's version");
  CLI::App* workers = app.add_subcommand("workers", "list the workers of the cluster");
  std::string output = "table";
  workers->add_option("-o,--output", output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }

  if (version->parsed()) {
    std::printf("cohort %s\n", cohort::kVersion);
    return kExitOk;
  }
  Connection connection;
  absl::StatusOr<cohort::HostPort> address = cohort::ParseHostPort(coordinator);
  absl::StatusOr<absl::Duration> deadline = cohort::ParsePositiveDuration(timeout, "--timeout");
  for (const absl::Status& s : {address.status(), deadline.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "cohort: error: %s\n", std::string(s.message()).c_str());
      return kExitUsage;
    }
  }
  connection.coordinator = *address;
  connection.timeout = *deadline;
  if (workers->parsed()) {
    return RunWorkersCommand(connection,
                             output == "json" ? OutputFormat::kJson : OutputFormat::kTable);
  }
  return kExitUsage;
}
