#include "worker/trainer/collective/prefix_store.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace cohort::trainer::collective {

PrefixStore::PrefixStore(std::string prefix, Store* base)
    : prefix_(std::move(prefix)), base_(base) {}

absl::Status PrefixStore::Set(absl::string_view key, absl::string_view value) {
  if (key.empty()) return absl::InvalidArgumentError("store key must not be empty");
  return base_->Set(absl::StrCat(prefix_, "/", key), value);
}

absl::StatusOr<std::vector<std::string>> PrefixStore::Get(const std::vector<std::string>& keys,
                                                          absl::Duration timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const std::string& key : keys) {
    if (key.empty()) return absl::InvalidArgumentError("store key must not be empty");
    full.push_back(absl::StrCat(prefix_, "/", key));
  }
  return base_->Get(full, timeout);
}

}  // namespace cohort::trainer::collective
