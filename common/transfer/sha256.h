#pragma once

// SHA-256, for content-addressed artifacts and checked transfers (OpenSSL's libcrypto).
// A Sha256 is used by one thread at a time.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(absl::string_view bytes);
  // The digest of everything passed to Update, as 64 lowercase hex digits. Ends the
  // hash: call it once.
  std::string HexDigest();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The hex SHA-256 of a file's bytes; errors name the file.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

// True for 64 lowercase hex digits.
bool IsSha256Hex(absl::string_view text);

}  // namespace cohort
