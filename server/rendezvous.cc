#include "server/rendezvous.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::server {
namespace {

constexpr size_t kMaxKeyBytes = 512;
constexpr size_t kMaxValueBytes = 1 << 20;
constexpr size_t kMaxKeys = 4096;
constexpr size_t kMaxGetKeys = 1024;

absl::Status CheckKey(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous key must be 1-", kMaxKeyBytes, " bytes, got ", key.size()));
  }
  return absl::OkStatus();
}

}  // namespace

std::string Rendezvous::Namespace(const std::string& job_id, int attempt) {
  return absl::StrCat(job_id, "/", attempt);
}

absl::Status Rendezvous::Ended(const std::string& ns) const {
  if (closed_) return absl::AbortedError("the coordinator is shutting down");
  size_t slash = ns.rfind('/');
  if (slash == std::string::npos || slash == 0) {
    return absl::AbortedError(absl::StrCat("rendezvous namespace '", ns,
                                           "' is not open (expected <job_id>/<attempt>)"));
  }
  return absl::AbortedError(absl::StrCat("attempt ", ns.substr(slash + 1), " of job ",
                                         ns.substr(0, slash), " has ended"));
}

void Rendezvous::Open(const std::string& ns) {
  absl::MutexLock lock(&mu_);
  if (!closed_) spaces_[ns];
}

void Rendezvous::Drop(const std::string& ns) {
  absl::MutexLock lock(&mu_);
  if (spaces_.erase(ns) > 0) changed_.SignalAll();
}

void Rendezvous::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  spaces_.clear();
  changed_.SignalAll();
}

bool Rendezvous::IsOpen(const std::string& ns) {
  absl::MutexLock lock(&mu_);
  return spaces_.count(ns) > 0;
}

absl::Status Rendezvous::Set(const std::string& ns, const std::string& key, std::string value) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  if (value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous value for '", key, "' is ",
                                                   value.size(), " bytes, more than ",
                                                   kMaxValueBytes));
  }
  absl::MutexLock lock(&mu_);
  auto it = spaces_.find(ns);
  if (it == spaces_.end()) return Ended(ns);
  if (it->second.size() >= kMaxKeys && it->second.count(key) == 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("rendezvous namespace '", ns, "' already holds ", kMaxKeys, " keys"));
  }
  it->second[key] = std::move(value);
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Rendezvous::Get(const std::string& ns,
                                                         const std::vector<std::string>& keys,
                                                         absl::Duration timeout,
                                                         const std::function<bool()>& cancelled) {
  if (keys.empty()) return absl::InvalidArgumentError("rendezvous get: no keys given");
  if (keys.size() > kMaxGetKeys) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous get: ", keys.size(), " keys, at most ", kMaxGetKeys));
  }
  for (const std::string& key : keys) {
    if (absl::Status s = CheckKey(key); !s.ok()) return s;
  }
  if (timeout <= absl::ZeroDuration()) timeout = absl::Minutes(5);
  timeout = std::min(timeout, absl::Minutes(30));
  const absl::Time deadline = absl::Now() + timeout;

  absl::MutexLock lock(&mu_);
  while (true) {
    auto it = spaces_.find(ns);
    if (it == spaces_.end()) return Ended(ns);
    std::vector<std::string> missing;
    for (const std::string& key : keys) {
      if (it->second.count(key) == 0) missing.push_back(key);
    }
    if (missing.empty()) {
      std::vector<std::string> values;
      values.reserve(keys.size());
      for (const std::string& key : keys) values.push_back(it->second.at(key));
      return values;
    }
    absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rendezvous '", ns, "': keys not set within ", absl::FormatDuration(timeout), ": ",
          absl::StrJoin(missing, ", ")));
    }
    if (cancelled && cancelled()) return absl::CancelledError("the caller went away");
    changed_.WaitWithTimeout(&mu_, std::min(deadline - now, absl::Seconds(1)));
  }
}

}  // namespace cohort::server
