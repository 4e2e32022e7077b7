// cohort-server as an operator meets it: health and reflection for probes and tools,
// clean shutdown, and one clear line for each kind of bad start.

#include <signal.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "absl/strings/str_split.h"
#include "tests/integration/cluster.h"
#include "tests/support/ports.h"

namespace cohort::testing {
namespace {

const std::string kProbe = std::string(COHORT_SOURCE_DIR) + "/tests/integration/grpc_probe.py";

CommandResult Probe(const std::vector<std::string>& args) {
  std::vector<std::string> argv{COHORT_VENV_PYTHON, kProbe};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, absl::Seconds(30));
}

CommandResult StartServer(const std::vector<std::string>& args) {
  std::vector<std::string> argv{COHORT_SERVER_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, absl::Seconds(30));
}

TEST_CASE("The coordinator serves grpc.health.v1 and server reflection", "[integration]") {
  Cluster cluster;
  REQUIRE(cluster.StartServer());
  CommandResult health = Probe({"health", cluster.address()});
  INFO(health.output);
  CHECK(health.out == "SERVING\n");
  CommandResult services = Probe({"services", cluster.address()});
  INFO(services.output);
  for (const char* name : {"cohort.v1.WorkerService", "cohort.v1.ClusterService",
                           "grpc.health.v1.Health"}) {
    CHECK(services.out.find(name) != std::string::npos);
  }
}

TEST_CASE("SIGTERM turns health NOT_SERVING before the coordinator stops", "[integration]") {
  Cluster cluster;
  REQUIRE(cluster.StartServer());
  std::string watch_log = cluster.dir().File("health-watch.log");
  Process watcher({COHORT_VENV_PYTHON, kProbe, "watch-health", cluster.address(), watch_log},
                  cluster.dir().File("watcher.log"));
  REQUIRE(WaitUntil([&] { return ReadFile(watch_log).find("SERVING") != std::string::npos; },
                    absl::Seconds(20)));
  ExitStatus status = cluster.StopServer();
  CHECK(status.code == 0);
  REQUIRE(watcher.Wait(absl::Seconds(20)).has_value());
  std::vector<std::string> seen = absl::StrSplit(ReadFile(watch_log), '\n', absl::SkipEmpty());
  INFO(ReadFile(watch_log));
  REQUIRE(seen.size() >= 2);
  CHECK(seen[0] == "SERVING");
  CHECK(seen[1] == "NOT_SERVING");
  CHECK(cluster.server().Output().find("stopped") != std::string::npos);
}

TEST_CASE("A busy port is refused with one clear line, and nothing is created",
          "[integration]") {
  Cluster cluster;
  REQUIRE(cluster.StartServer());
  TempDir other;
  std::string data = other.File("data");
  CommandResult r = StartServer({"--listen", cluster.address(), "--data-dir", data});
  CHECK(r.status.code == 1);
  CHECK(r.output == "cohort-server: error: cannot listen on " + cluster.address() +
                        ": Address already in use\n");
  CHECK_FALSE(std::filesystem::exists(data));
}

TEST_CASE("A corrupt database is refused, naming the file, and left as it was",
          "[integration]") {
  TempDir dir;
  std::filesystem::create_directories(dir.File("data"));
  std::string db = dir.File("data/cohort.db");
  WriteFile(db, std::string(4096, 'x'));
  CommandResult r = StartServer(
      {"--listen", "127.0.0.1:" + std::to_string(FreePort()), "--data-dir", dir.File("data")});
  CHECK(r.status.code == 1);
  CHECK(r.output.find(db + " is corrupt or not an SQLite database") != std::string::npos);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  CHECK(ReadFile(db) == std::string(4096, 'x'));
}

TEST_CASE("An unusable data dir is refused, naming it", "[integration]") {
  TempDir dir;
  WriteFile(dir.File("file"), "not a directory");
  std::string bad = dir.File("file/data");
  CommandResult r =
      StartServer({"--listen", "127.0.0.1:" + std::to_string(FreePort()), "--data-dir", bad});
  CHECK(r.status.code == 1);
  CHECK(r.output.find("--data-dir " + bad + ": cannot create directory") != std::string::npos);
}

TEST_CASE("Bad flags are refused with exit code 2 or a named error", "[integration]") {
  TempDir dir;
  CHECK(StartServer({"--data-dir", dir.path(), "--no-such-flag"}).status.code == 2);
  CHECK(StartServer({"--listen", "127.0.0.1:0"}).status.code == 2);  // --data-dir missing
  CommandResult ttl = StartServer({"--data-dir", dir.path(), "--lease-ttl", "10"});
  CHECK(ttl.status.code == 1);
  CHECK(ttl.output.find("--lease-ttl: '10' is not a duration") != std::string::npos);
  CommandResult listen = StartServer({"--data-dir", dir.path(), "--listen", "localhost"});
  CHECK(listen.output.find("address 'localhost' has no port") != std::string::npos);
  CommandResult worker = RunCommand({COHORT_WORKER_BIN, "--coordinator", "127.0.0.1:1",
                                     "--name", "bad name!"}, absl::Seconds(20));
  CHECK(worker.status.code == 1);
  CHECK(worker.output.find("--name: 'bad name!' is not a valid name") != std::string::npos);
  CHECK(RunCommand({COHORT_WORKER_BIN, "--name", "w"}).status.code == 2);  // no coordinator
}

}  // namespace
}  // namespace cohort::testing
