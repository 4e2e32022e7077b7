#pragma once

// TokenTable: who may call the coordinator, read from `cohort-server --token-file`
// (docs/security.md). One entry a line, fields separated by blanks; blank lines and
// lines starting with '#' are ignored:
//
//   # TOKEN (or sha256:<64 hex of the token>)                         IDENTITY  ROLE
//   sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8  alice  user
//   3f8a1c7e9b2d4f60a5e8c1b3d7f9a2e4                                   ci       admin
//
// A token is one word of printable ASCII, at least 16 characters when written in clear;
// `sha256:` entries keep the file free of secrets (the table stores only digests either
// way). IDENTITY follows the rules of worker names (common/names.h): it becomes the
// owner of the jobs and uploads of whoever presents the token. ROLE is user, admin or
// worker. One identity has one role (it may have several tokens, for rotation); a token
// appears once.
//
// Find() hashes the presented token and compares it with every entry's digest in
// constant time, so neither the answer's timing nor an error message says anything
// about the tokens held. Nothing here logs a token. Immutable once built: any thread.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort::server {

enum class Role { kUser, kAdmin, kWorker };

// "user", "admin", "worker".
absl::string_view RoleName(Role role);

// Who made a call.
struct Caller {
  std::string identity;
  Role role = Role::kUser;
};

class TokenTable {
 public:
  // INVALID_ARGUMENT "<source>:<line>: ..." for a malformed entry (never quoting a token).
  static absl::StatusOr<TokenTable> Parse(absl::string_view text, absl::string_view source);
  // Parse() of a file's contents; errors name the file.
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // The caller `token` belongs to; nullopt for a token not in the table.
  std::optional<Caller> Find(absl::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::array<uint8_t, 32> digest;
    Caller caller;
  };
  std::vector<Entry> entries_;
};

}  // namespace cohort::server
