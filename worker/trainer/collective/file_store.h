#pragma once

// FileStore: a Store in a directory that every rank can read and write, for standalone
// runs (`--rendezvous file://DIR`): ranks on one host, or on hosts sharing a file system.
//
// Each key is one file, named by escaping the key (bytes other than [A-Za-z0-9_-] become
// %XX, so "attempt-1/rank_0" is "attempt-1%2Frank_0"). Set writes a hidden temporary file
// and renames it into place, so a reader sees a whole value or no file. Get polls for the
// files. The directory is not cleaned: give every run a fresh one (or a PrefixStore
// namespace). Thread-safe; any number of processes may share the directory.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/trainer/collective/store.h"

namespace cohort::trainer::collective {

class FileStore final : public Store {
 public:
  // Creates `dir` (and its parents) if missing. INVALID_ARGUMENT for an empty path,
  // UNAVAILABLE when the directory cannot be created; the error names the path.
  static absl::StatusOr<std::unique_ptr<FileStore>> Open(std::string dir);

  // Errors name the file: UNAVAILABLE when it cannot be written or renamed.
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  // UNAVAILABLE when a file exists but cannot be read.
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override;

  const std::string& dir() const { return dir_; }

 private:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}

  std::string PathOf(absl::string_view key) const;

  const std::string dir_;
};

}  // namespace cohort::trainer::collective
