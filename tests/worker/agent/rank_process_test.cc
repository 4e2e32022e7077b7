#include "worker/agent/rank_process.h"

#include <signal.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tests/support/process.h"

namespace cohort::agent {
namespace {

// Collects a RankProcess's lines (the callbacks run on its reader thread).
struct Lines {
  absl::Mutex mu;
  std::vector<std::string> out, err;
  int exits = 0;

  RankProcessOptions Options(std::vector<std::string> argv) {
    RankProcessOptions options;
    options.argv = std::move(argv);
    options.on_stdout_line = [this](absl::string_view line) {
      absl::MutexLock lock(&mu);
      out.emplace_back(line);
    };
    options.on_stderr_line = [this](absl::string_view line) {
      absl::MutexLock lock(&mu);
      err.emplace_back(line);
    };
    options.on_exit = [this](const ProcessExit&) {
      absl::MutexLock lock(&mu);
      ++exits;
    };
    return options;
  }
  bool SawOut(const std::string& line) {
    absl::MutexLock lock(&mu);
    return std::find(out.begin(), out.end(), line) != out.end();
  }
};

std::vector<std::string> Sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

// Gone, or a zombie waiting for init: either way no longer running.
bool Gone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  return paren == std::string::npos || (paren + 2 < text.size() && text[paren + 2] == 'Z');
}

TEST_CASE("stdout and stderr arrive line by line, the last line without a newline too",
          "[agent][process]") {
  Lines lines;
  auto process = RankProcess::Start(
      lines.Options(Sh("echo out1; echo err1 >&2; echo out2; printf 'partial'")));
  REQUIRE(process.ok());
  std::optional<ProcessExit> exit = (*process)->Wait(absl::Seconds(10));
  REQUIRE(exit.has_value());
  CHECK(exit->code == 0);
  CHECK(exit->signal == 0);
  CHECK(exit->ToString() == "exit code 0");
  // on_exit runs on the reader thread right after Wait() is released.
  CHECK(testing::WaitUntil(
      [&] {
        absl::MutexLock lock(&lines.mu);
        return lines.exits == 1;
      },
      absl::Seconds(5)));
  absl::MutexLock lock(&lines.mu);
  CHECK(lines.out == std::vector<std::string>{"out1", "out2", "partial"});
  CHECK(lines.err == std::vector<std::string>{"err1"});
}

TEST_CASE("exit codes and signals are reported", "[agent][process]") {
  Lines a, b;
  auto code = RankProcess::Start(a.Options(Sh("exit 3")));
  REQUIRE(code.ok());
  CHECK((*code)->Wait(absl::Seconds(10))->code == 3);
  CHECK_FALSE((*code)->Running());

  auto killed = RankProcess::Start(b.Options(Sh("kill -9 $$")));
  REQUIRE(killed.ok());
  std::optional<ProcessExit> exit = (*killed)->Wait(absl::Seconds(10));
  REQUIRE(exit.has_value());
  CHECK(exit->code == -1);
  CHECK(exit->signal == SIGKILL);
  CHECK(exit->ToString().find("signal 9") != std::string::npos);
}

TEST_CASE("the environment is extended and the stdin is empty", "[agent][process]") {
  Lines lines;
  RankProcessOptions options = lines.Options(Sh("echo \"$COHORT_TEST_VAR\"; cat; echo end"));
  options.env["COHORT_TEST_VAR"] = "from the agent";
  auto process = RankProcess::Start(std::move(options));
  REQUIRE(process.ok());
  REQUIRE((*process)->Wait(absl::Seconds(10)).has_value());
  absl::MutexLock lock(&lines.mu);
  CHECK(lines.out == std::vector<std::string>{"from the agent", "end"});
}

TEST_CASE("a program that cannot run is an error, not a child", "[agent][process]") {
  Lines lines;
  auto missing = RankProcess::Start(lines.Options({"/nonexistent/cohort-trainer", "train"}));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(missing.status().message().find("/nonexistent/cohort-trainer") != std::string::npos);
  CHECK(RankProcess::Start(lines.Options({})).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Stop sends SIGTERM, even when the agent blocks it", "[agent][process]") {
  // Whatever the calling thread blocks, children must start with SIGTERM unblocked.
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, &old);
  Lines lines;
  auto process = RankProcess::Start(lines.Options(Sh("echo ready; sleep 30")));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  REQUIRE(process.ok());
  REQUIRE(testing::WaitUntil([&] { return lines.SawOut("ready"); }, absl::Seconds(10)));
  absl::Time start = absl::Now();
  (*process)->Stop(absl::Seconds(20));
  std::optional<ProcessExit> exit = (*process)->Wait(absl::Seconds(10));
  REQUIRE(exit.has_value());
  CHECK(exit->signal == SIGTERM);
  CHECK(absl::Now() - start < absl::Seconds(5));
}

TEST_CASE("Stop escalates to SIGKILL after the grace for a child that ignores SIGTERM",
          "[agent][process]") {
  Lines lines;
  auto process = RankProcess::Start(
      lines.Options(Sh("trap '' TERM; echo ready; while true; do sleep 0.05; done")));
  REQUIRE(process.ok());
  REQUIRE(testing::WaitUntil([&] { return lines.SawOut("ready"); }, absl::Seconds(10)));
  absl::Time start = absl::Now();
  (*process)->Stop(absl::Milliseconds(500));
  (*process)->Stop(absl::Seconds(60));  // a later, longer grace does not extend it
  CHECK_FALSE((*process)->Wait(absl::Milliseconds(300)).has_value());
  std::optional<ProcessExit> exit = (*process)->Wait(absl::Seconds(10));
  REQUIRE(exit.has_value());
  CHECK(exit->signal == SIGKILL);
  absl::Duration took = absl::Now() - start;
  CHECK(took >= absl::Milliseconds(450));
  CHECK(took < absl::Seconds(5));
  (*process)->Stop(absl::ZeroDuration());  // a no-op once ended
}

TEST_CASE("nothing the child started outlives it", "[agent][process]") {
  Lines lines;
  // The child leaves a grandchild (holding the pipes open) and exits.
  auto process = RankProcess::Start(lines.Options(Sh("sleep 30 & echo $!; exit 0")));
  REQUIRE(process.ok());
  std::optional<ProcessExit> exit = (*process)->Wait(absl::Seconds(10));
  REQUIRE(exit.has_value());
  CHECK(exit->code == 0);
  int grandchild = 0;
  {
    absl::MutexLock lock(&lines.mu);
    REQUIRE(lines.out.size() == 1);
    REQUIRE(absl::SimpleAtoi(lines.out[0], &grandchild));
  }
  CHECK(testing::WaitUntil([&] { return Gone(grandchild); }, absl::Seconds(5)));
}

TEST_CASE("destroying a RankProcess kills its child", "[agent][process]") {
  Lines lines;
  pid_t pid = 0;
  {
    auto process = RankProcess::Start(lines.Options(Sh("trap '' TERM; echo ready; sleep 30")));
    REQUIRE(process.ok());
    pid = (*process)->pid();
    REQUIRE(testing::WaitUntil([&] { return lines.SawOut("ready"); }, absl::Seconds(10)));
    CHECK((*process)->Running());
  }
  CHECK(Gone(pid));
}

TEST_CASE("long lines are split at max_line_bytes", "[agent][process]") {
  Lines lines;
  RankProcessOptions options = lines.Options(Sh("head -c 2500 /dev/zero | tr '\\0' x; echo"));
  options.max_line_bytes = 1000;
  auto process = RankProcess::Start(std::move(options));
  REQUIRE(process.ok());
  REQUIRE((*process)->Wait(absl::Seconds(10)).has_value());
  absl::MutexLock lock(&lines.mu);
  REQUIRE(lines.out.size() == 3);
  CHECK(lines.out[0].size() == 1000);
  CHECK(lines.out[2].size() == 500);
}

}  // namespace
}  // namespace cohort::agent
