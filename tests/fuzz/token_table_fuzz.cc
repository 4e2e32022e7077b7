// libFuzzer entry point for cohort-server's --token-file parser (server/token_table.h):
// any bytes give a table or INVALID_ARGUMENT, never a crash or a hang; in a table that
// parses, every clear-text token of the file finds the identity its line names.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "server/token_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<cohort::server::TokenTable> table =
      cohort::server::TokenTable::Parse(text, "fuzz-tokens");
  if (!table.ok()) {
    if (table.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  if (table->size() == 0) std::abort();
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 3 || absl::StartsWith(fields[0], "sha256:")) continue;
    std::optional<cohort::server::Caller> caller = table->Find(fields[0]);
    if (!caller || caller->identity != fields[1]) std::abort();
  }
  (void)table->Find("not-a-token-in-any-table");
  return 0;
}
