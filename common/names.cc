#include "common/names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace cohort {

absl::Status CheckName(absl::string_view name, absl::string_view field) {
  bool ok = !name.empty() && name.size() <= 63 && absl::ascii_isalnum(name[0]);
  for (char c : name) {
    ok = ok && (absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": '", name,
                   "' is not a valid name (1-63 letters, digits, '.', '-', '_'; starting with a "
                   "letter or digit)"));
}

}  // namespace cohort
