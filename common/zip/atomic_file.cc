#include "common/zip/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

absl::StatusOr<std::unique_ptr<AtomicFile>> AtomicFile::Create(const std::string& path) {
  // Unique per writer, so writers of one path in one process (threads) do not share it.
  static std::atomic<uint64_t> writers{0};
  std::string temp_path = absl::StrCat(path, ".tmp-", getpid(), "-", writers.fetch_add(1));
  int fd = open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", temp_path));
  return std::unique_ptr<AtomicFile>(new AtomicFile(path, std::move(temp_path), fd));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) Abandon(absl::OkStatus()).IgnoreError();
}

absl::Status AtomicFile::Abandon(absl::Status error) {
  close(fd_);
  fd_ = -1;
  unlink(temp_path_.c_str());
  return error;
}

absl::Status AtomicFile::Append(absl::string_view bytes) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": writer already closed"));
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Abandon(absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", temp_path_)));
    p += n;
    left -= static_cast<size_t>(n);
  }
  size_ += bytes.size();
  return absl::OkStatus();
}

absl::Status AtomicFile::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": writer already closed"));
  if (fsync(fd_) != 0) return Abandon(absl::ErrnoToStatus(errno, absl::StrCat("cannot fsync ", temp_path_)));
  int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) {
    int err = errno;
    unlink(temp_path_.c_str());
    return absl::ErrnoToStatus(err, absl::StrCat("cannot close ", temp_path_));
  }
  if (rename(temp_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    unlink(temp_path_.c_str());
    return absl::ErrnoToStatus(err, absl::StrCat("cannot rename ", temp_path_, " to ", path_));
  }
  // The rename is durable once the directory is synced.
  std::string dir = DirectoryOf(path_);
  int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open directory ", dir));
  int rc = fsync(dir_fd);
  int err = errno;
  close(dir_fd);
  if (rc != 0) return absl::ErrnoToStatus(err, absl::StrCat("cannot fsync directory ", dir));
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes) {
  absl::StatusOr<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  if (absl::Status s = (*file)->Append(bytes); !s.ok()) return s;
  return (*file)->Commit();
}

}  // namespace cohort
