#include "common/path_roots.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort {
namespace {

// realpath(3): every symlink, "." and ".." resolved; the path must exist.
absl::StatusOr<std::string> RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return absl::InvalidArgumentError(std::strerror(errno));
  }
  return std::string(resolved);
}

bool Inside(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

}  // namespace

absl::StatusOr<PathRoots> PathRoots::Create(const std::vector<std::string>& roots,
                                            absl::string_view flag) {
  PathRoots out;
  out.flag_ = std::string(flag);
  for (const std::string& root : roots) {
    absl::StatusOr<std::string> real = RealPath(root);
    struct stat st;
    if (!real.ok() || ::stat(real->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": '", root, "' is not an existing directory"));
    }
    out.roots_.push_back(*real);
  }
  return out;
}

absl::Status PathRoots::Check(const std::string& path, absl::string_view field) const {
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", path, "' is not an absolute path"));
  }
  if (roots_.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> real = RealPath(path);
  if (!real.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": cannot read ", path, ": ", real.status().message()));
  }
  for (const std::string& root : roots_) {
    if (Inside(*real, root)) return absl::OkStatus();
  }
  std::string shown = *real == path ? "" : absl::StrCat(" (it resolves to ", *real, ")");
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": '", path, "'", shown, " is outside the allowed data roots (",
                   absl::StrJoin(roots_, ", "), "; see ", flag_, ")"));
}

}  // namespace cohort
