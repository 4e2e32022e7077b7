#include "client/watch.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/exit_codes.h"
#include "client/job_format.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "proto/channel.h"

namespace cohort::client {
namespace {

void Write(const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// Codes after which reconnecting may help: the coordinator went away or restarted.
bool Retryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::CANCELLED || code == grpc::StatusCode::ABORTED ||
         code == grpc::StatusCode::INTERNAL || code == grpc::StatusCode::UNKNOWN ||
         code == grpc::StatusCode::OK;
}

}  // namespace

int TerminalColumns() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

ProgressStyle StyleFromFlag(const std::string& output, bool* color) {
  *color = false;
  if (output == "json") return ProgressStyle::kJson;
  if (output == "plain") return ProgressStyle::kPlain;
  const char* term = std::getenv("TERM");
  const bool dumb = term != nullptr && std::string(term) == "dumb";
  if (output == "tty" || (isatty(STDOUT_FILENO) && !dumb)) {
    const char* no_color = std::getenv("NO_COLOR");
    *color = !(no_color != nullptr && *no_color != '\0') && !dumb;
    return ProgressStyle::kTty;
  }
  return ProgressStyle::kPlain;
}

int WatchJob(const Connection& connection, const WatchOptions& options,
             InterruptWatcher& interrupt) {
  interrupt.StartWatching();
  auto stub = NewJobStub(connection);

  v1::Job job;
  grpc::Status status = GetJob(connection, *stub, options.job_id, &job);
  if (!status.ok()) return ReportCallError(connection, status);

  ProgressOptions progress;
  progress.style = options.style;
  progress.color = options.color;
  progress.logs_only = options.logs_only;
  progress.columns = options.columns;
  progress.max_restarts = job.spec().has_max_restarts() ? job.spec().max_restarts() : 3;
  ProgressRenderer renderer(options.job_id, progress);
  // Without --follow, stop at the newest event stored now.
  const int64_t stop_at = job.last_sequence();
  if (!options.follow && stop_at == 0) return kExitOk;

  std::optional<v1::JobState> final_state;
  std::optional<absl::Time> lost_since;
  absl::Duration backoff = absl::Milliseconds(250);
  bool said_lost = false;
  while (true) {
    grpc::ClientContext context;
    interrupt.SetCall(&context);
    v1::WatchJobRequest request;
    request.set_job_id(options.job_id);
    request.set_after_sequence(renderer.last_sequence());
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = stub->WatchJob(&context, request);
    v1::JobEvent event;
    bool reached_stop = false;
    while (reader->Read(&event)) {
      if (said_lost) {
        std::fprintf(stderr, "cohort: reconnected to the coordinator\n");
        said_lost = false;
      }
      lost_since.reset();
      backoff = absl::Milliseconds(250);
      if (event.has_state_change() && IsFinal(event.state_change().to())) {
        final_state = event.state_change().to();
        if (event.state_change().reason().empty() && options.style != ProgressStyle::kJson) {
          // Say why a job failed even when its final event does not: Job.reason does.
          v1::Job now;
          if (GetJob(connection, *stub, options.job_id, &now).ok()) {
            event.mutable_state_change()->set_reason(now.reason());
          }
        }
      }
      Write(renderer.Render(event));
      if (!options.follow && event.sequence() >= stop_at) {
        reached_stop = true;
        context.TryCancel();
        break;
      }
    }
    status = reader->Finish();
    interrupt.SetCall(nullptr);

    if (interrupt.interrupted()) {
      Write(renderer.Close());
      std::fprintf(stderr,
                   "cohort: detached from %s; it keeps running. Reattach with: cohort watch %s\n",
                   options.job_id.c_str(), options.job_id.c_str());
      return kExitInterrupted;
    }
    if (reached_stop) {
      Write(renderer.Close());
      return kExitOk;
    }
    if (final_state) {
      Write(renderer.Close());
      if (*final_state == v1::JOB_STATE_SUCCEEDED && options.follow &&
          (options.style == ProgressStyle::kTty || options.style == ProgressStyle::kPlain)) {
        std::fprintf(stderr, "cohort: get the trained model with: cohort download %s -o DIR\n",
                     options.job_id.c_str());
      }
      return options.follow ? ExitCodeForState(*final_state) : kExitOk;
    }
    if (!Retryable(status.error_code())) {
      Write(renderer.Close());
      return ReportCallError(connection, status);
    }
    if (status.ok()) {
      // The stream ended without the final event (a coordinator shutting down closes its
      // streams): ask where the job is, and resume unless it is over.
      v1::Job now;
      grpc::Status got = GetJob(connection, *stub, options.job_id, &now);
      if (got.ok() && IsFinal(now.state()) && now.last_sequence() <= renderer.last_sequence()) {
        Write(renderer.Close());
        return options.follow ? ExitCodeForState(now.state()) : kExitOk;
      }
    }
    const absl::Time now = absl::Now();
    if (!lost_since) lost_since = now;
    if (now - *lost_since > options.reconnect_for) {
      Write(renderer.Close());
      std::fprintf(stderr,
                   "cohort: error: lost the coordinator at %s for %s (%s); the job may still be "
                   "running: cohort watch %s\n",
                   connection.coordinator.ToString().c_str(),
                   absl::FormatDuration(options.reconnect_for).c_str(),
                   status.error_message().c_str(), options.job_id.c_str());
      return kExitUnreachable;
    }
    if (!said_lost && !status.ok()) {
      Write(renderer.Close());
      std::fprintf(stderr, "cohort: lost the connection to the coordinator (%s); reconnecting\n",
                   status.error_message().c_str());
      said_lost = true;
    }
    // Sleep in small steps so Ctrl-C stays prompt.
    const absl::Time wake = absl::Now() + backoff;
    while (absl::Now() < wake && !interrupt.interrupted()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

}  // namespace cohort::client
