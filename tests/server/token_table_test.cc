// The --token-file parser (server/token_table.h) and the --insecure rule
// (server/listen_check.h).

#include "server/token_table.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "server/listen_check.h"
#include "tests/support/temp_dir.h"

namespace cohort::server {
namespace {

constexpr const char* kAlice = "alice-token-0123456789abcdef";
// echo -n admin-token-0123456789abcdef | sha256sum
constexpr const char* kAdminDigest =
    "sha256:b82c960b03eefe922830902342744b424aa2c080c8a8d4db775d181949549a6c";

std::string Error(absl::string_view text) {
  absl::StatusOr<TokenTable> table = TokenTable::Parse(text, "tokens");
  REQUIRE_FALSE(table.ok());
  CHECK(table.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(table.status().message());
}

}  // namespace

TEST_CASE("A token file maps tokens in clear or as sha256 to identities and roles",
          "[server][auth]") {
  const std::string text = std::string("# comment\n\n  ") + kAlice + "   alice  user\n" +
                           kAdminDigest + "\troot admin\n" +
                           "worker-token-0123456789abcdef agent worker\n" +
                           "alice-second-token-0123456789 alice user   # rotation\n";
  // The trailing comment is a 4th field: refused. Without it, the file parses.
  CHECK(absl::StrContains(Error(text), "tokens:6: expected 3 fields"));
  absl::StatusOr<TokenTable> table =
      TokenTable::Parse(text.substr(0, text.find("   # rotation")) + "\n", "tokens");
  INFO(table.status().ToString());
  REQUIRE(table.ok());
  CHECK(table->size() == 4);

  std::optional<Caller> alice = table->Find(kAlice);
  REQUIRE(alice);
  CHECK(alice->identity == "alice");
  CHECK(alice->role == Role::kUser);
  REQUIRE(table->Find("alice-second-token-0123456789"));
  CHECK(table->Find("alice-second-token-0123456789")->identity == "alice");

  std::optional<Caller> root = table->Find("admin-token-0123456789abcdef");
  REQUIRE(root);
  CHECK(root->identity == "root");
  CHECK(root->role == Role::kAdmin);
  // The digest itself is not a token.
  CHECK_FALSE(table->Find(kAdminDigest));
  CHECK_FALSE(table->Find(std::string(kAdminDigest).substr(7)));

  std::optional<Caller> agent = table->Find("worker-token-0123456789abcdef");
  REQUIRE(agent);
  CHECK(agent->role == Role::kWorker);

  CHECK_FALSE(table->Find(""));
  CHECK_FALSE(table->Find("alice-token-0123456789abcdeF"));
  CHECK_FALSE(table->Find(std::string(kAlice) + "x"));
  CHECK_FALSE(table->Find(std::string(kAlice).substr(1)));
}

TEST_CASE("Malformed token files are refused naming the line and never quoting a token",
          "[server][auth]") {
  const std::string secret = "super-secret-token-123456";
  CHECK(Error("") == "tokens: holds no token entries");
  CHECK(Error("# only a comment\n") == "tokens: holds no token entries");
  CHECK(Error("\n" + secret + " alice\n") ==
        "tokens:2: expected 3 fields (TOKEN IDENTITY ROLE), found 2");
  CHECK(Error(secret + " alice owner\n") == "tokens:1: role 'owner' is not user, admin or worker");
  CHECK(Error("short-token alice user\n") ==
        "tokens:1: the token is shorter than 16 characters; use a long random one (openssl rand "
        "-hex 32)");
  CHECK(Error("sha256:abcd alice user\n") ==
        "tokens:1: a sha256: entry needs 64 hex digits (the SHA-256 of the token)");
  CHECK(Error(std::string("sha256:") + std::string(63, 'a') + "g alice user\n") ==
        "tokens:1: a sha256: entry needs 64 hex digits (the SHA-256 of the token)");
  CHECK(absl::StartsWith(Error(secret + " ../alice user\n"), "tokens:1: identity: '../alice'"));
  CHECK(Error(secret + " alice user\n" + secret + " bob user\n") ==
        "tokens:2: this token is already in the table");
  // The same token in clear and as its digest is the same token.
  CHECK(Error("admin-token-0123456789abcdef root admin\n" + std::string(kAdminDigest) +
              " root admin\n") == "tokens:2: this token is already in the table");
  CHECK(Error(secret + " alice user\nanother-token-0123456789 alice admin\n") ==
        "tokens:2: identity 'alice' already has role user; one identity has one role");
  for (const std::string& text :
       {secret + " alice\n", secret + " alice owner\n", secret + " alice user\n" + secret + " bob user\n"}) {
    absl::StatusOr<TokenTable> table = TokenTable::Parse(text, "tokens");
    REQUIRE_FALSE(table.ok());
    CHECK_FALSE(absl::StrContains(table.status().message(), secret));
  }
}

TEST_CASE("A token file is read from disk and a missing one is named", "[server][auth]") {
  testing::TempDir dir;
  std::string path = dir.File("tokens");
  testing::WriteFile(path, std::string(kAlice) + " alice user\n");
  absl::StatusOr<TokenTable> table = TokenTable::Load(path);
  REQUIRE(table.ok());
  CHECK(table->Find(kAlice));
  absl::StatusOr<TokenTable> missing = TokenTable::Load(dir.File("nope"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() ==
        "--token-file " + dir.File("nope") + ": cannot read the file (missing, or not readable)");
  testing::WriteFile(path, "x y\n");
  CHECK(TokenTable::Load(path).status().message() ==
        "--token-file " + path + ":1: expected 3 fields (TOKEN IDENTITY ROLE), found 2");
}

TEST_CASE("A non-loopback --listen needs a token file and TLS or --insecure", "[server][auth]") {
  CHECK(IsLoopbackHost("127.0.0.1"));
  CHECK(IsLoopbackHost("127.1.2.3"));
  CHECK(IsLoopbackHost("::1"));
  CHECK(IsLoopbackHost("localhost"));
  CHECK_FALSE(IsLoopbackHost("0.0.0.0"));
  CHECK_FALSE(IsLoopbackHost("::"));
  CHECK_FALSE(IsLoopbackHost(""));
  CHECK_FALSE(IsLoopbackHost("10.1.2.3"));
  CHECK_FALSE(IsLoopbackHost("no-such-host.invalid"));

  const HostPort any{"0.0.0.0", 7070};
  const HostPort loopback{"127.0.0.1", 7070};
  CHECK(CheckListenSecurity(loopback, false, false, false).ok());
  CHECK(CheckListenSecurity(any, true, true, false).ok());
  CHECK(CheckListenSecurity(any, false, false, true).ok());
  absl::Status no_tokens = CheckListenSecurity(any, false, true, false);
  CHECK(no_tokens.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(no_tokens.message(),
                          "--listen 0.0.0.0:7070 is not a loopback address and there is no --token-file"));
  CHECK(absl::StrContains(no_tokens.message(), "--insecure"));
  absl::Status no_tls = CheckListenSecurity(any, true, false, false);
  CHECK(no_tls.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(no_tls.message(), "there is no --tls-cert/--tls-key: tokens would cross"));
}

}  // namespace cohort::server
