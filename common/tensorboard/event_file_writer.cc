#include "common/tensorboard/event_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/tensorboard/record.h"

namespace cohort::tensorboard {
namespace {

std::atomic<int> next_file_number{0};

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::FailedPreconditionError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(const std::string& dir,
                                                                          const Clock& clock) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  absl::Time now = clock.Now();
  std::string path = absl::StrCat(dir, "/events.out.tfevents.", absl::ToUnixSeconds(now), ".",
                                  HostName(), ".", getpid(), ".", next_file_number.fetch_add(1));
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", path);
  std::unique_ptr<EventFileWriter> writer(new EventFileWriter(path, fd, clock));
  AppendRecord(EncodeFileVersionEvent(UnixSeconds(now), kFileVersion),
               &writer->pending_);
  if (absl::Status s = writer->Flush(); !s.ok()) return s;
  return writer;
}

EventFileWriter::EventFileWriter(std::string path, int fd, const Clock& clock)
    : path_(std::move(path)), fd_(fd), clock_(clock) {}

EventFileWriter::~EventFileWriter() {
  Flush().IgnoreError();
  close(fd_);
}

void EventFileWriter::AddScalars(int64_t step, const std::vector<Scalar>& scalars) {
  if (scalars.empty()) return;
  AppendRecord(EncodeScalarsEvent(UnixSeconds(clock_.Now()), step, scalars),
               &pending_);
}

absl::Status EventFileWriter::Flush() {
  if (!broken_.ok()) return broken_;
  if (pending_.empty()) return absl::OkStatus();
  size_t done = 0;
  while (done < pending_.size()) {
    ssize_t n = write(fd_, pending_.data() + done, pending_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      broken_ = Errno("cannot write", path_);
      return broken_;
    }
    done += static_cast<size_t>(n);
  }
  pending_.clear();
  if (fdatasync(fd_) != 0 && errno != EINVAL) {
    broken_ = Errno("cannot sync", path_);
    return broken_;
  }
  return absl::OkStatus();
}

}  // namespace cohort::tensorboard
