#pragma once

// RankProcess: one trainer process (or any child) that the agent started, with its
// output read line by line and its end observed.
//
// Start() forks and execs argv (argv[0] is a path) in a process group of its own, with
// stdin on /dev/null, stdout and stderr on pipes, the signal mask and the dispositions
// of SIGTERM/SIGINT/SIGPIPE reset (the agent blocks the first two), `env` added to the
// environment, and PR_SET_PDEATHSIG(SIGKILL): the kernel kills the child when the
// thread that called Start() ends, so call Start() from a thread that outlives the
// process (the agent's per-rank thread, which waits for it).
//
// A reader thread owned by the RankProcess reads both pipes and calls on_stdout_line /
// on_stderr_line for every complete line (without the newline; a last line without one
// is delivered at the end; lines past max_line_bytes are split). It never blocks on
// anything but the pipes, so a slow consumer must queue rather than wait in a callback.
// When the process ends, what is left in the pipes is read, anything still alive in its
// process group is killed, the process is reaped with waitpid and on_exit runs (on the
// reader thread, once, after Wait() would return). Nothing the RankProcess started
// outlives it.
//
// Stop(grace): SIGTERM to the group now, SIGKILL to the group once `grace` has passed
// (escalated by the reader thread, so Stop() never blocks). Any thread may call any
// method; callbacks must not call Wait() or destroy the RankProcess.

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort::agent {

struct ProcessExit {
  int code = -1;   // the exit code, or -1 when a signal ended it
  int signal = 0;  // the signal that ended it, else 0
  // "exit code 3", "killed by signal 9 (Killed)".
  std::string ToString() const;
};

struct RankProcessOptions {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to (or replacing in) the agent's
  std::function<void(absl::string_view line)> on_stdout_line;
  std::function<void(absl::string_view line)> on_stderr_line;
  std::function<void(const ProcessExit& exit)> on_exit;
  size_t max_line_bytes = 1 << 20;
};

class RankProcess {
 public:
  // INVALID_ARGUMENT for an empty argv; FAILED_PRECONDITION naming argv[0] and errno's
  // text when it cannot be executed (nothing is left running then).
  static absl::StatusOr<std::unique_ptr<RankProcess>> Start(RankProcessOptions options);

  // Kills the group (SIGKILL) if the process still runs, and waits for the reader.
  ~RankProcess();
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;

  pid_t pid() const { return pid_; }

  // SIGTERM to the process group, SIGKILL after `grace`. A second call may shorten the
  // grace, never lengthen it. A no-op once the process has ended.
  void Stop(absl::Duration grace);

  // The exit, once the process has ended and been reaped and its output read;
  // nullopt if that did not happen within `timeout`.
  std::optional<ProcessExit> Wait(absl::Duration timeout = absl::InfiniteDuration());
  bool Running();

 private:
  RankProcess(RankProcessOptions options, pid_t pid, int out_fd, int err_fd);
  void ReadUntilExit();

  const RankProcessOptions options_;
  const pid_t pid_;
  int out_fd_;
  int err_fd_;
  absl::Mutex mu_;
  std::optional<absl::Time> kill_at_ ABSL_GUARDED_BY(mu_);
  bool killed_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<ProcessExit> exit_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;
};

}  // namespace cohort::agent
