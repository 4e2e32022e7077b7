#include "worker/agent/rank_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace cohort::agent {
namespace {

// How often the reader looks at the process when its pipes are quiet.
constexpr int kPollMillis = 50;
// After the process ended, how long to keep reading pipes that a stray descendant
// outside the group may still hold open.
constexpr absl::Duration kDrainAfterExit = absl::Seconds(2);

ProcessExit FromWaitStatus(int status) {
  ProcessExit exit;
  if (WIFEXITED(status)) {
    exit.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
  }
  return exit;
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Splits what a pipe delivers into lines.
class LineSplitter {
 public:
  LineSplitter(size_t max, const std::function<void(absl::string_view)>* sink)
      : max_(max), sink_(sink) {}
  void Add(absl::string_view data) {
    while (!data.empty()) {
      size_t nl = data.find('\n');
      absl::string_view piece = data.substr(0, nl);
      pending_.append(piece.data(), piece.size());
      while (pending_.size() > max_) {
        Emit(absl::string_view(pending_).substr(0, max_));
        pending_.erase(0, max_);
      }
      if (nl == absl::string_view::npos) return;
      Emit(pending_);
      pending_.clear();
      data.remove_prefix(nl + 1);
    }
  }
  void Finish() {
    if (!pending_.empty()) Emit(pending_);
    pending_.clear();
  }

 private:
  void Emit(absl::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (*sink_) (*sink_)(line);
  }
  size_t max_;
  const std::function<void(absl::string_view)>* sink_;
  std::string pending_;
};

}  // namespace

std::string ProcessExit::ToString() const {
  if (signal != 0) return absl::StrCat("killed by signal ", signal, " (", strsignal(signal), ")");
  return absl::StrCat("exit code ", code);
}

absl::StatusOr<std::unique_ptr<RankProcess>> RankProcess::Start(RankProcessOptions options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return absl::InvalidArgumentError("RankProcess: empty command line");
  }
  // Everything the child needs is prepared here: between fork and exec only
  // async-signal-safe calls are allowed.
  std::vector<char*> argv;
  for (std::string& arg : options.argv) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view entry(*e);
    absl::string_view name = entry.substr(0, entry.find('='));
    if (options.env.count(std::string(name)) == 0) env_strings.emplace_back(entry);
  }
  for (const auto& [name, value] : options.env) env_strings.push_back(absl::StrCat(name, "=", value));
  std::vector<char*> envp;
  for (std::string& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);

  int out[2], err[2], status_pipe[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]), close(out[1]);
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  int dev_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  // Signals stay blocked from fork until the child has reset the agent's handlers
  // (common/signals.h), so a SIGTERM sent to the child meanwhile cannot run the agent's
  // handler in it; the child then starts with nothing blocked.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGTERM, &dfl, nullptr);
    sigaction(SIGINT, &dfl, nullptr);
    sigaction(SIGPIPE, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (dev_null >= 0) dup2(dev_null, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execve(argv[0], argv.data(), envp.data());
    int error = errno;
    ssize_t ignored = write(status_pipe[1], &error, sizeof(error));
    (void)ignored;
    _exit(127);
  }
  int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (dev_null >= 0) close(dev_null);
  close(out[1]);
  close(err[1]);
  close(status_pipe[1]);
  if (pid < 0) {
    close(out[0]), close(err[0]), close(status_pipe[0]);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", strerror(fork_errno)));
  }
  setpgid(pid, pid);  // also here, so the group exists when Start() returns
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(status_pipe[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  close(status_pipe[0]);
  if (n > 0) {
    int ignored;
    waitpid(pid, &ignored, 0);
    close(out[0]), close(err[0]);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", options.argv[0], ": ", strerror(exec_errno)));
  }
  auto process = std::unique_ptr<RankProcess>(new RankProcess(std::move(options), pid, out[0], err[0]));
  process->reader_ = std::thread([p = process.get()] { p->ReadUntilExit(); });
  return process;
}

RankProcess::RankProcess(RankProcessOptions options, pid_t pid, int out_fd, int err_fd)
    : options_(std::move(options)), pid_(pid), out_fd_(out_fd), err_fd_(err_fd) {}

RankProcess::~RankProcess() {
  {
    absl::MutexLock lock(&mu_);
    if (!exit_.has_value() && !killed_) {
      kill(-pid_, SIGKILL);
      killed_ = true;
    }
  }
  if (reader_.joinable()) reader_.join();
}

void RankProcess::Stop(absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  if (exit_.has_value() || killed_) return;
  absl::Time at = absl::Now() + std::max(grace, absl::ZeroDuration());
  if (!kill_at_.has_value()) {
    kill(-pid_, SIGTERM);
    kill_at_ = at;
  } else if (at < *kill_at_) {
    kill_at_ = at;
  }
}

std::optional<ProcessExit> RankProcess::Wait(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ended = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return exit_.has_value(); };
  mu_.AwaitWithTimeout(absl::Condition(&ended), timeout);
  return exit_;
}

bool RankProcess::Running() {
  absl::MutexLock lock(&mu_);
  return !exit_.has_value();
}

void RankProcess::ReadUntilExit() {
  LineSplitter out_lines(options_.max_line_bytes, &options_.on_stdout_line);
  LineSplitter err_lines(options_.max_line_bytes, &options_.on_stderr_line);
  std::string buffer(64 * 1024, '\0');
  bool exited = false;
  absl::Time drain_until = absl::InfiniteFuture();
  while (true) {
    pollfd fds[2];
    int nfds = 0;
    if (out_fd_ >= 0) fds[nfds++] = {out_fd_, POLLIN, 0};
    if (err_fd_ >= 0) fds[nfds++] = {err_fd_, POLLIN, 0};
    int ready = poll(fds, nfds, kPollMillis);
    if (ready > 0) {
      for (int i = 0; i < nfds; ++i) {
        if (fds[i].revents == 0) continue;
        bool is_out = fds[i].fd == out_fd_;
        ssize_t n = read(fds[i].fd, buffer.data(), buffer.size());
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) {
          (is_out ? out_lines : err_lines).Finish();
          CloseFd(is_out ? out_fd_ : err_fd_);
          continue;
        }
        (is_out ? out_lines : err_lines).Add(absl::string_view(buffer.data(), n));
      }
    }
    {
      absl::MutexLock lock(&mu_);
      if (kill_at_.has_value() && !killed_ && absl::Now() >= *kill_at_) {
        kill(-pid_, SIGKILL);
        killed_ = true;
      }
    }
    if (!exited) {
      siginfo_t info{};
      // WNOWAIT: the process stays a zombie, so its pid (and group id) cannot be reused
      // while its group is cleaned up below.
      if (waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_) {
        exited = true;
        kill(-pid_, SIGKILL);  // whatever it left behind in its group
        drain_until = absl::Now() + kDrainAfterExit;
      }
    }
    if (exited && ((out_fd_ < 0 && err_fd_ < 0) || absl::Now() >= drain_until)) break;
  }
  out_lines.Finish();
  err_lines.Finish();
  CloseFd(out_fd_);
  CloseFd(err_fd_);
  {
    absl::MutexLock lock(&mu_);
    killed_ = true;  // from here on nobody signals the (soon reaped) pid
  }
  int status = 0;
  pid_t reaped;
  do {
    reaped = waitpid(pid_, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  ProcessExit exit = FromWaitStatus(status);
  {
    absl::MutexLock lock(&mu_);
    exit_ = exit;
  }
  if (options_.on_exit) options_.on_exit(exit);
}

}  // namespace cohort::agent
