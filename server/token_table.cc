#include "server/token_table.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/names.h"
#include "proto/channel.h"

namespace cohort::server {
namespace {

constexpr size_t kMinClearTokenLength = 16;
constexpr absl::string_view kSha256Prefix = "sha256:";

std::array<uint8_t, 32> DigestOf(absl::string_view token) {
  std::array<uint8_t, 32> out;
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), out.data());
  return out;
}

bool ParseHexDigest(absl::string_view hex, std::array<uint8_t, 32>* out) {
  if (hex.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    int value = 0;
    for (char c : hex.substr(2 * i, 2)) {
      int v = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (v < 0) return false;
      value = value * 16 + v;
    }
    (*out)[i] = static_cast<uint8_t>(value);
  }
  return true;
}

bool Printable(absl::string_view token) {
  for (char c : token) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

absl::StatusOr<Role> ParseRole(absl::string_view text) {
  if (text == "user") return Role::kUser;
  if (text == "admin") return Role::kAdmin;
  if (text == "worker") return Role::kWorker;
  return absl::InvalidArgumentError(
      absl::StrCat("role '", text, "' is not user, admin or worker"));
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kUser: return "user";
    case Role::kAdmin: return "admin";
    case Role::kWorker: return "worker";
  }
  return "unknown";
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text, absl::string_view source) {
  TokenTable table;
  std::map<std::string, Role> roles;  // identity -> role, to refuse two roles for one
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_number, ": ", why));
    };
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 3) {
      return bad(absl::StrCat("expected 3 fields (TOKEN IDENTITY ROLE), found ", fields.size()));
    }
    Entry entry;
    absl::string_view token = fields[0];
    if (absl::StartsWith(token, kSha256Prefix)) {
      if (!ParseHexDigest(token.substr(kSha256Prefix.size()), &entry.digest)) {
        return bad("a sha256: entry needs 64 hex digits (the SHA-256 of the token)");
      }
    } else {
      if (!Printable(token)) return bad("the token has a non-printable character");
      if (token.size() < kMinClearTokenLength) {
        return bad(absl::StrCat("the token is shorter than ", kMinClearTokenLength,
                                " characters; use a long random one (openssl rand -hex 32)"));
      }
      entry.digest = DigestOf(token);
    }
    if (absl::Status s = CheckName(fields[1], "identity"); !s.ok()) return bad(s.message());
    absl::StatusOr<Role> role = ParseRole(fields[2]);
    if (!role.ok()) return bad(role.status().message());
    entry.caller = Caller{std::string(fields[1]), *role};
    auto [it, inserted] = roles.emplace(entry.caller.identity, *role);
    if (!inserted && it->second != *role) {
      return bad(absl::StrCat("identity '", entry.caller.identity, "' already has role ",
                              RoleName(it->second), "; one identity has one role"));
    }
    for (const Entry& e : table.entries_) {
      if (e.digest == entry.digest) return bad("this token is already in the table");
    }
    table.entries_.push_back(std::move(entry));
  }
  if (table.entries_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": holds no token entries"));
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSecurityFile(path, "--token-file");
  if (!text.ok()) return text.status();
  absl::StatusOr<TokenTable> table = Parse(*text, absl::StrCat("--token-file ", path));
  return table;
}

std::optional<Caller> TokenTable::Find(absl::string_view token) const {
  const std::array<uint8_t, 32> digest = DigestOf(token);
  const Entry* found = nullptr;
  // Every entry is compared, whatever matched before.
  for (const Entry& e : entries_) {
    if (CRYPTO_memcmp(e.digest.data(), digest.data(), digest.size()) == 0) found = &e;
  }
  if (found == nullptr) return std::nullopt;
  return found->caller;
}

}  // namespace cohort::server
