#include "worker/trainer/collective/file_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "worker/trainer/collective/deadline.h"

namespace cohort::trainer::collective {
namespace {

std::string Escape(absl::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : key) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '-') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

absl::Status WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(std::strerror(errno));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// The file's contents; nullopt when it does not exist (yet).
absl::StatusOr<std::optional<std::string>> ReadIfExists(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return absl::UnavailableError(
        absl::StrCat("cannot open rendezvous file ", path, ": ", std::strerror(errno)));
  }
  std::string out;
  char chunk[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return absl::UnavailableError(
          absl::StrCat("cannot read rendezvous file ", path, ": ", std::strerror(err)));
    }
    if (n == 0) break;
    out.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return std::optional<std::string>(std::move(out));
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::Open(std::string dir) {
  if (dir.empty()) return absl::InvalidArgumentError("file store: empty directory path");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("file store: cannot create directory ", dir, ": ", ec.message()));
  }
  return std::unique_ptr<FileStore>(new FileStore(std::move(dir)));
}

std::string FileStore::PathOf(absl::string_view key) const {
  return absl::StrCat(dir_, "/", Escape(key));
}

absl::Status FileStore::Set(absl::string_view key, absl::string_view value) {
  if (key.empty()) return absl::InvalidArgumentError("store key must not be empty");
  static std::atomic<uint64_t> counter{0};
  // Hidden ('.' never starts an escaped key) and unique per process and call.
  std::string tmp =
      absl::StrCat(dir_, "/.tmp-", Escape(key), "-", ::getpid(), "-", counter.fetch_add(1));
  std::string path = PathOf(key);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create rendezvous file ", tmp, ": ", std::strerror(errno)));
  }
  absl::Status written = WriteAll(fd, value);
  if (::close(fd) != 0 && written.ok()) written = absl::UnavailableError(std::strerror(errno));
  if (written.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    written = absl::UnavailableError(absl::StrCat("rename: ", std::strerror(errno)));
  }
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot write rendezvous file ", path, ": ", written.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FileStore::Get(const std::vector<std::string>& keys,
                                                        absl::Duration timeout) {
  std::vector<std::optional<std::string>> values(keys.size());
  for (const std::string& key : keys) {
    if (key.empty()) return absl::InvalidArgumentError("store key must not be empty");
  }
  absl::Status error;
  auto all_found = [&] {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (values[i]) continue;
      absl::StatusOr<std::optional<std::string>> value = ReadIfExists(PathOf(keys[i]));
      if (!value.ok()) {
        error = value.status();
        return true;
      }
      if (!*value) return false;
      values[i] = std::move(**value);
    }
    return true;
  };
  bool done = PollUntil(absl::Now() + timeout, all_found, absl::Microseconds(200),
                        absl::Milliseconds(20));
  if (!error.ok()) return error;
  if (!done) {
    std::vector<std::string> missing;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!values[i]) missing.push_back(keys[i]);
    }
    return absl::DeadlineExceededError(
        absl::StrCat("timed out after ", absl::FormatDuration(timeout), " waiting for key",
                     missing.size() == 1 ? " " : "s ", absl::StrJoin(missing, ", "),
                     " in file store ", dir_));
  }
  std::vector<std::string> out;
  out.reserve(values.size());
  for (auto& value : values) out.push_back(std::move(*value));
  return out;
}

}  // namespace cohort::trainer::collective
