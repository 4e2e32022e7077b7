#pragma once

// A file that appears at its path complete or not at all.
//
// Bytes go to `<path>.tmp-<pid>-<n>` (n counts the process' writers) in the same directory; Commit() fsyncs it, renames it
// over `path` and fsyncs the directory, so a reader (or a crash) sees either the old
// file or the whole new one. Until Commit() succeeds nothing is at `path`: any failed
// call, or destroying the AtomicFile uncommitted, closes and removes the temporary
// file. Several AtomicFiles may write one path at once; the last Commit() wins.
//
// Thread safety: not thread-safe; one thread uses an AtomicFile.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

class AtomicFile {
 public:
  // Creates (or truncates) the temporary file. Errors come from open(2).
  static absl::StatusOr<std::unique_ptr<AtomicFile>> Create(const std::string& path);

  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends `bytes`. After an error the temporary file is gone and every later call
  // fails with FailedPrecondition.
  absl::Status Append(absl::string_view bytes);
  // Bytes appended so far: the offset the next Append writes at.
  uint64_t size() const { return size_; }
  // Makes the file visible at `path`. Afterwards the AtomicFile accepts no more calls.
  absl::Status Commit();

  const std::string& path() const { return path_; }

 private:
  AtomicFile(std::string path, std::string temp_path, int fd)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd) {}
  // Closes and removes the temporary file; returns `error` for chaining.
  absl::Status Abandon(absl::Status error);

  std::string path_;
  std::string temp_path_;
  int fd_;  // -1 once committed or abandoned
  uint64_t size_ = 0;
};

// An AtomicFile at `path` holding `bytes`.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes);

}  // namespace cohort
