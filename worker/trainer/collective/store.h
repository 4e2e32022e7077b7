#pragma once

// Store: the small key-value store through which the ranks of one attempt find each
// other (rendezvous). Ranks publish what their peers need (Gloo addresses, the NCCL
// unique id) under keys and read their peers' keys, waiting until they exist.
//
// Keys are set once per namespace: an attempt (or standalone run) uses a namespace of its
// own (PrefixStore, or a fresh FileStore directory), so a restarted attempt never reads
// the keys of the one before it. Values are arbitrary bytes.
//
// Implementations: FileStore (a directory shared by the ranks of a standalone run), and
// the agent's store backed by the coordinator's rendezvous service. Both are thread-safe:
// any thread may call any method.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace cohort::trainer::collective {

class Store {
 public:
  virtual ~Store() = default;

  // Publishes `value` under `key`, replacing any earlier value. Readers see the whole
  // value or nothing. `key` must not be empty (INVALID_ARGUMENT).
  virtual absl::Status Set(absl::string_view key, absl::string_view value) = 0;

  // Blocks until every key in `keys` exists, then returns their values in the same
  // order. DEADLINE_EXCEEDED after `timeout`, naming the keys that were still missing.
  virtual absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                                       absl::Duration timeout) = 0;
};

}  // namespace cohort::trainer::collective
