#include "server/data_dir.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace cohort::server {

absl::Status PrepareDataDir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (dir.empty()) return absl::InvalidArgumentError("--data-dir: must be set");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("--data-dir ", dir, ": cannot create directory: ", ec.message()));
  }
  if (!fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(absl::StrCat("--data-dir ", dir, ": not a directory"));
  }
  // access() is not enough when running as root on a read-only mount: try for real.
  std::string probe = absl::StrCat(dir, "/.write-test-", getpid());
  {
    std::ofstream out(probe);
    if (!out || !(out << "ok") || !out.flush()) {
      int err = errno;
      fs::remove(probe, ec);
      return absl::FailedPreconditionError(
          absl::StrCat("--data-dir ", dir, ": not writable: ", std::strerror(err)));
    }
  }
  fs::remove(probe, ec);
  return absl::OkStatus();
}

}  // namespace cohort::server
