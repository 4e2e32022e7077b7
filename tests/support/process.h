#pragma once

// Child processes for integration tests: the real binaries, started on loopback.
//
// A Process runs in its own process group with its stdout and stderr in a log file. It
// is killed (the whole group, SIGKILL) and reaped when the Process is destroyed, and
// the kernel kills it if the test process itself dies (PR_SET_PDEATHSIG), so a failing
// or crashing test leaves nothing behind.

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace cohort::testing {

struct ExitStatus {
  int code = -1;    // exit code, or -1 when killed by a signal
  int signal = 0;   // the signal that killed it, or 0
};

class Process {
 public:
  // Starts `argv` (argv[0] is a path) with `env` added to this process's environment.
  Process(std::vector<std::string> argv, std::string log_path,
          std::map<std::string, std::string> env = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `sig` to the process (not its group).
  void Signal(int sig);
  // Waits for the process to end; nullopt when it is still running after `timeout`.
  std::optional<ExitStatus> Wait(absl::Duration timeout);
  bool Running();
  // Everything the process wrote so far.
  std::string Output() const;

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  std::optional<ExitStatus> exit_;
};

struct CommandResult {
  ExitStatus status;
  std::string output;  // stdout and stderr together
  std::string out;     // stdout alone
};

// Runs a command to completion (killed after `timeout`) and returns what it printed.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         absl::Duration timeout = absl::Seconds(60),
                         const std::map<std::string, std::string>& env = {});

// Polls `condition` every 50 ms until it holds or `timeout` passes.
bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout);


}  // namespace cohort::testing
