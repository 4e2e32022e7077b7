#include "worker/agent/rank_runner.h"

#include <signal.h>

#include <filesystem>
#include <map>

#include <grpcpp/client_context.h>
#include <spdlog/spdlog.h>

#include "common/logging.h"
#include "common/path_roots.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/zip/atomic_file.h"
#include "proto/channel.h"
#include "proto/grpc_status.h"
#include "worker/agent/event_translation.h"
#include "worker/agent/tensorboard_upload.h"

namespace cohort::agent {
namespace {

constexpr size_t kMaxExitMessage = 4096;
constexpr absl::Duration kTensorBoardInterval = absl::Seconds(10);

std::string Describe(const v1::RankRef& rank) {
  return absl::StrCat("job ", rank.job_id(), " attempt ", rank.attempt(), " rank ", rank.rank());
}

absl::Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

bool RetryableReport(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsUnknown(status) || absl::IsInternal(status) || absl::IsResourceExhausted(status) ||
         absl::IsAborted(status) || absl::IsCancelled(status);
}

}  // namespace

RankRunner::RankRunner(const RunnerContext& context, v1::Assignment assignment)
    : context_(context), assignment_(std::move(assignment)), thread_([this] { Run(); }) {}

RankRunner::~RankRunner() {
  {
    absl::MutexLock lock(&mu_);
    stop_requested_ = true;
    abandoned_ = true;  // an exit report still failing is tried once more, not forever
    if (process_) process_->Stop(absl::ZeroDuration());
  }
  canceller_.Cancel();
  if (thread_.joinable()) thread_.join();
}

void RankRunner::Stop() {
  absl::MutexLock lock(&mu_);
  if (!active_) return;  // its trainer has ended: only the report may be under way
  canceller_.Cancel();
  if (!stop_requested_) spdlog::info("stopping {}", Describe(rank()));
  stop_requested_ = true;
  if (process_) process_->Stop(context_.stop_grace);
}

bool RankRunner::Active() {
  absl::MutexLock lock(&mu_);
  return active_;
}

bool RankRunner::Done() {
  absl::MutexLock lock(&mu_);
  return done_;
}

bool RankRunner::WaitDone(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return done_; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

void RankRunner::Run() {
  // Everything this thread logs is about this rank (the JSON log format says so).
  ScopedJobLogFields log_fields({rank().job_id(), rank().attempt(), rank().rank()});
  if (context_.metrics) context_.metrics->RankStarted(rank());
  const RankPaths paths = PathsOf(context_.work_dir, rank());
  absl::Status prepared = Prepare(paths);
  bool stopped;
  {
    absl::MutexLock lock(&mu_);
    stopped = stop_requested_;
  }
  if (stopped) {
    ReportExit(-1, SIGTERM, "stopped before the trainer started");
  } else if (!prepared.ok()) {
    spdlog::warn("{}: {}", Describe(rank()), prepared.message());
    ReportExit(1, 0, std::string(prepared.message()));
  } else {
    absl::StatusOr<ProcessExit> exit = LaunchAndWait(paths);
    {
      absl::MutexLock lock(&mu_);
      active_ = false;
    }
    if (!exit.ok()) {
      spdlog::warn("{}: {}", Describe(rank()), exit.status().message());
      ReportExit(1, 0, std::string(exit.status().message()));
    } else {
      spdlog::info("{} ended: {}", Describe(rank()), exit->ToString());
      UploadPendingCheckpoints(paths);
      int code = exit->code;
      std::string message;
      {
        absl::MutexLock lock(&mu_);
        message = !error_message_.empty() ? error_message_ : last_log_;
      }
      if (rank().rank() == 0 && code == 0) {
        for (const char* name : {"model.keras", "history.json"}) {
          absl::Status uploaded = UploadArtifact(context_.worker, rank(), name,
                                                 paths.out_dir + "/" + name, context_.transfer);
          if (!uploaded.ok()) {
            spdlog::warn("{}: {}", Describe(rank()), uploaded.message());
            code = 1;
            message = absl::StrCat("the trainer finished, but ", uploaded.message());
            break;
          }
        }
      }
      if (rank().rank() == 0) UploadTensorBoardFiles(paths);
      UploadTrace(paths);
      ReportExit(code, exit->signal, message);
    }
  }
  if (context_.metrics) context_.metrics->RankEnded(rank());
  absl::MutexLock lock(&mu_);
  active_ = false;
  done_ = true;
}

absl::Status RankRunner::Prepare(const RankPaths& paths) {
  if (absl::Status s = CheckStartAssignment(assignment_); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad assignment: ", s.message()));
  }
  if (absl::Status s = MakeDirs(paths.out_dir); !s.ok()) return s;
  if (absl::Status s = MakeDirs(paths.attempt_dir); !s.ok()) return s;
  std::map<std::string, std::string> artifact_paths;
  for (const v1::DataArtifact& artifact : assignment_.data_artifacts()) {
    if (canceller_.cancelled()) return absl::CancelledError("stopped");
    absl::StatusOr<std::string> path = context_.cache->Fetch(artifact, &canceller_);
    if (!path.ok()) return path.status();
    artifact_paths[artifact.artifact_id()] = *path;
  }
  absl::StatusOr<std::string> yaml = TrainerJobYaml(assignment_, artifact_paths);
  if (!yaml.ok()) return absl::InvalidArgumentError(absl::StrCat("job spec: ", yaml.status().message()));
  // The ranks of one attempt on this host write the same job.yaml; each write is whole.
  if (absl::Status s = WriteFileAtomically(paths.job_yaml, *yaml); !s.ok()) return s;

  const std::string& checkpoint = assignment_.checkpoint_artifact();
  if (rank().rank() == 0 && assignment_.resume() && !checkpoint.empty()) {
    std::string dir = paths.out_dir + "/checkpoints";
    std::string target = absl::StrCat(dir, "/", checkpoint.substr(checkpoint.rfind('/') + 1));
    std::error_code ec;
    if (!std::filesystem::exists(target, ec)) {
      if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
      absl::Status got = DownloadJobArtifact(context_.jobs, rank().job_id(), checkpoint, target,
                                             context_.transfer, &canceller_);
      if (!got.ok()) {
        if (canceller_.cancelled()) return absl::CancelledError("stopped");
        // The trainer then resumes from what this host kept, or starts afresh: slower,
        // but the job goes on.
        Warn(absl::StrCat("cannot fetch checkpoint '", checkpoint, "' to resume from: ",
                          got.message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ProcessExit> RankRunner::LaunchAndWait(const RankPaths& paths) {
  if (assignment_.spec().trace()) {
    // An earlier attempt's timeline must not pass for this one's.
    std::error_code ec;
    std::filesystem::remove(paths.out_dir + "/trace/rank-" + std::to_string(rank().rank()) + ".json", ec);
  }
  TrainerCommand command = TrainerCommandFor(assignment_, paths, context_.launch);
  RankProcessOptions options;
  options.argv = command.argv;
  options.env = command.env;
  options.on_stdout_line = [this](absl::string_view line) { OnStdout(line); };
  options.on_stderr_line = [this](absl::string_view line) { OnStderr(line); };
  options.on_exit = [this](const ProcessExit&) {
    absl::MutexLock lock(&mu_);
    exited_ = true;
  };
  absl::StatusOr<std::unique_ptr<RankProcess>> started = RankProcess::Start(std::move(options));
  if (!started.ok()) return started.status();
  spdlog::info("started {} (pid {})", Describe(rank()), (*started)->pid());
  RankProcess* process = started->get();
  {
    absl::MutexLock lock(&mu_);
    process_ = std::move(*started);
    if (stop_requested_) process_->Stop(context_.stop_grace);  // a STOP during the launch
  }
  while (true) {
    bool upload_tensorboard = false;
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return exited_ || !checkpoints_.empty() || epoch_ended_;
      };
      mu_.Await(absl::Condition(&wake));
      if (checkpoints_.empty() && !epoch_ended_) break;
      upload_tensorboard = epoch_ended_;
      epoch_ended_ = false;
    }
    UploadPendingCheckpoints(paths);
    // At most every kTensorBoardInterval: the event files grow with every epoch, and a
    // run of many short epochs would otherwise send them over and over.
    if (upload_tensorboard && absl::Now() - tensorboard_uploaded_ >= kTensorBoardInterval) {
      UploadTensorBoardFiles(paths);
    }
  }
  ProcessExit exit = *process->Wait();
  std::unique_ptr<RankProcess> finished;
  {
    absl::MutexLock lock(&mu_);
    finished = std::move(process_);
  }
  return exit;  // `finished` is destroyed outside the lock: it joins its reader thread
}

void RankRunner::UploadPendingCheckpoints(const RankPaths& paths) {
  while (true) {
    std::string file;
    {
      absl::MutexLock lock(&mu_);
      if (checkpoints_.empty()) return;
      file = checkpoints_.front();
      checkpoints_.pop_front();
    }
    std::string name = absl::StrCat("checkpoints/", std::filesystem::path(file).filename().string());
    absl::StatusOr<PathRoots> dir = PathRoots::Create({paths.out_dir + "/checkpoints"}, "checkpoints");
    if (absl::Status s = dir.ok() ? dir->Check(file, "checkpoint") : dir.status(); !s.ok()) {
      Warn(absl::StrCat("not uploading ", name, ": ", s.message()));
      continue;
    }
    // A checkpoint rotated away before its upload, or a coordinator away: the next
    // checkpoint (or this host's copy) serves a resume instead. The job's owner sees the
    // warning among the job's events: a resume may then go back further than expected.
    UploadOrWarn(name, file);
  }
}

void RankRunner::UploadTensorBoardFiles(const RankPaths& paths) {
  tensorboard_uploaded_ = absl::Now();
  UploadTensorBoard(context_.worker, rank(), paths.out_dir, context_.transfer, &tensorboard_sent_);
}

void RankRunner::UploadTrace(const RankPaths& paths) {
  if (!assignment_.spec().trace()) return;
  const std::string name = absl::StrCat("trace/rank-", rank().rank(), ".json");
  const std::string file = paths.out_dir + "/" + name;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    Warn(absl::StrCat("no trace to upload (the trainer wrote none to ", file, ")"));
    return;
  }
  UploadOrWarn(name, file);
}

void RankRunner::UploadOrWarn(const std::string& name, const std::string& file) {
  absl::Status uploaded = UploadArtifact(context_.worker, rank(), name, file, context_.transfer);
  if (uploaded.ok()) {
    spdlog::info("{}: uploaded {}", Describe(rank()), name);
  } else {
    Warn(std::string(uploaded.message()));
  }
}

void RankRunner::Warn(const std::string& text) {
  spdlog::warn("{}: {}", Describe(rank()), text);
  v1::RankEvent event;
  *event.mutable_rank() = rank();
  event.mutable_log()->set_rank(rank().rank());
  event.mutable_log()->set_level(v1::LOG_LEVEL_WARNING);
  event.mutable_log()->set_text(text);
  context_.events->Push(std::move(event));
}

void RankRunner::OnStdout(absl::string_view line) {
  if (context_.metrics) context_.metrics->OnTrainerLine(rank(), line);
  TrainerLine translated = TranslateStdoutLine(line, rank());
  const bool epoch_ended = rank().rank() == 0 && translated.event && translated.event->has_epoch();
  if (translated.error_message || translated.checkpoint_file || epoch_ended) {
    absl::MutexLock lock(&mu_);
    if (epoch_ended) epoch_ended_ = true;
    if (translated.error_message) error_message_ = *translated.error_message;
    if (translated.checkpoint_file && rank().rank() == 0) {
      checkpoints_.push_back(*translated.checkpoint_file);
    }
  }
  if (translated.event) context_.events->Push(std::move(*translated.event));
}

void RankRunner::OnStderr(absl::string_view line) {
  v1::RankEvent event = TranslateStderrLine(line, rank());
  if (!event.log().text().empty()) {
    absl::MutexLock lock(&mu_);
    last_log_ = event.log().text();
  }
  context_.events->Push(std::move(event));
}

void RankRunner::ReportExit(int code, int signal, const std::string& message) {
  v1::ReportExitRequest request;
  *request.mutable_rank() = rank();
  request.set_exit_code(code);
  request.set_signal(signal);
  request.set_message(message.substr(0, kMaxExitMessage));
  absl::Duration backoff = absl::Milliseconds(100);
  absl::Time give_up = absl::InfiniteFuture();
  bool warned = false;
  while (true) {
    v1::ReportExitResponse response;
    absl::Status status = FromGrpcStatus(context_.worker->ReportExit(
        ContextWithDeadline(context_.rpc_timeout).get(), request, &response));
    if (status.ok()) {
      if (warned) spdlog::info("{}: exit reported", Describe(rank()));
      return;
    }
    if (!RetryableReport(status)) {
      spdlog::warn("{}: the coordinator refused its exit report: {}", Describe(rank()),
                   status.message());
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (abandoned_) {
        spdlog::warn("{}: exit not reported: {}", Describe(rank()), status.message());
        return;
      }
    }
    if (context_.shutdown != nullptr && context_.shutdown->HasBeenNotified()) {
      if (give_up == absl::InfiniteFuture()) give_up = absl::Now() + context_.shutdown_report_timeout;
      if (absl::Now() >= give_up) {
        spdlog::warn("{}: could not report its exit before shutting down: {}", Describe(rank()),
                     status.message());
        return;
      }
    }
    if (!warned) {
      spdlog::warn("{}: cannot report its exit yet ({}); retrying", Describe(rank()),
                   status.message());
      warned = true;
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

}  // namespace cohort::agent
