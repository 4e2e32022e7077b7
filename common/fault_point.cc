#include "common/fault_point.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace cohort {
namespace {

constexpr absl::Duration kMaxHold = absl::Seconds(120);

struct Armed {
  std::string dir;
  std::string name;
  int nth = 1;
  std::atomic<int> hits{0};
};

// nullptr (inert) unless both variables are set and well formed.
Armed* FromEnvironment() {
  const char* dir = std::getenv("COHORT_FAULT_DIR");
  const char* point = std::getenv("COHORT_FAULT_POINT");
  if (dir == nullptr || point == nullptr || *dir == '\0' || *point == '\0') return nullptr;
  auto* armed = new Armed();  // lives as long as the process
  armed->dir = dir;
  absl::string_view spec = point;
  size_t at = spec.rfind('@');
  armed->name = std::string(spec.substr(0, at));
  if (at != absl::string_view::npos &&
      (!absl::SimpleAtoi(spec.substr(at + 1), &armed->nth) || armed->nth < 1)) {
    armed->nth = 1;
  }
  return armed;
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

}  // namespace

void FaultPoint(absl::string_view name) {
  static Armed* const armed = FromEnvironment();
  if (armed == nullptr || name != armed->name) return;
  if (armed->hits.fetch_add(1) + 1 != armed->nth) return;
  const std::string base = absl::StrCat(armed->dir, "/", armed->name);
  // The pid goes into a file of this process, which link() then publishes under the
  // shared name: the test never reads a half-written pid, and only one process wins.
  const std::string mine = absl::StrCat(base, ".hit-", getpid());
  int fd = open(mine.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  std::string pid = absl::StrCat(getpid(), "\n");
  bool written = write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
  close(fd);
  bool won = written && link(mine.c_str(), (base + ".hit").c_str()) == 0;
  unlink(mine.c_str());
  if (!won) return;
  const absl::Time give_up = absl::Now() + kMaxHold;
  while (!Exists(base + ".go") && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(20));
}

}  // namespace cohort
