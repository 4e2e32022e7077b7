#include "tests/support/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {
namespace {

ExitStatus Decode(int status) {
  ExitStatus out;
  if (WIFEXITED(status)) out.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  return out;
}

// Forks and execs; the child writes stdout to `out_fd` and stderr to `err_fd`.
pid_t Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            int out_fd, int err_fd) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    // Tests may block signals (the daemons do); children start with a clean mask.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    dprintf(2, "exec %s failed: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  return pid;
}

}  // namespace

Process::Process(std::vector<std::string> argv, std::string log_path,
                 std::map<std::string, std::string> env)
    : log_path_(std::move(log_path)) {
  int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + log_path_);
  pid_ = Spawn(argv, env, fd, fd);
  close(fd);
}

Process::~Process() {
  if (pid_ > 0 && !exit_) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    Wait(absl::Seconds(10));
  }
}

void Process::Signal(int sig) {
  if (!exit_) kill(pid_, sig);
}

std::optional<ExitStatus> Process::Wait(absl::Duration timeout) {
  if (exit_) return exit_;
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_ = Decode(status);
      // Anything it left in its group goes with it.
      kill(-pid_, SIGKILL);
      return exit_;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool Process::Running() { return !Wait(absl::ZeroDuration()).has_value(); }

std::string Process::Output() const { return ReadFile(log_path_); }

CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout,
                         const std::map<std::string, std::string>& env) {
  TempDir dir;
  std::string all_path = dir.File("all"), out_path = dir.File("out");
  int all_fd = open(all_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // stdout goes to its own file; stderr to the combined one. The combined output is
  // stdout followed by stderr, which is what tests need to search.
  pid_t pid = Spawn(argv, env, out_fd, all_fd);
  close(all_fd);
  close(out_fd);
  CommandResult result;
  absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (absl::Now() >= deadline) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(-pid, SIGKILL);
  result.status = Decode(status);
  result.out = ReadFile(out_path);
  result.output = result.out + ReadFile(all_path);
  return result;
}

bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace cohort::testing
