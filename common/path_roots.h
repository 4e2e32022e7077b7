#pragma once

// PathRoots: the folders a daemon may read paths from that a request names (a job
// spec's model and data paths). A path is allowed when, with every symlink and every
// "." and ".." resolved (realpath), it is one of the roots or lies inside one, so
// "/srv/data/../../etc/passwd", "/etc/passwd" and "/srv/data/link-to-etc" are all
// refused when the only root is /srv/data.
//
// No roots means no confinement (any absolute path): the default of cohort-server,
// whose --allowed-data-root flags fill this in (docs/reliability.md).
//
// The check is made when a request arrives; a file swapped for a symlink afterwards is
// not caught (whoever can do that can already write inside the root).
//
// Thread safety: a PathRoots is immutable after Create; Check may be called from any
// thread.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

class PathRoots {
 public:
  PathRoots() = default;  // no confinement

  // Every root must be an existing directory; stored as its realpath. INVALID_ARGUMENT
  // naming `flag` otherwise.
  static absl::StatusOr<PathRoots> Create(const std::vector<std::string>& roots,
                                          absl::string_view flag);

  // OK when `path` is absolute and (with roots set) resolves inside a root. Otherwise
  // INVALID_ARGUMENT starting with `field`: "data.x: '/etc/passwd' is outside the
  // allowed data roots (/srv/data)", or NOT_FOUND-like INVALID_ARGUMENT "cannot read"
  // when the path does not resolve.
  absl::Status Check(const std::string& path, absl::string_view field) const;

  bool confined() const { return !roots_.empty(); }
  const std::vector<std::string>& roots() const { return roots_; }

 private:
  std::vector<std::string> roots_;  // realpaths, no trailing '/' (except "/")
  std::string flag_;
};

}  // namespace cohort
