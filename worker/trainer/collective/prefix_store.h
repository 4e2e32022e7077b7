#pragma once

// PrefixStore: a namespace inside another Store. Every key is stored as
// "<prefix>/<key>", so attempts (or the backends of one attempt) sharing one store never
// see each other's keys. Thread-safe if the underlying store is.

#include <string>
#include <vector>

#include "worker/trainer/collective/store.h"

namespace cohort::trainer::collective {

class PrefixStore final : public Store {
 public:
  // `base` is not owned and must outlive this store.
  PrefixStore(std::string prefix, Store* base);

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override;

 private:
  const std::string prefix_;
  Store* const base_;
};

}  // namespace cohort::trainer::collective
