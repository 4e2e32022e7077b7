#include "common/job/field_error.h"

#include <charconv>

#include "absl/strings/str_cat.h"

namespace cohort::job {

absl::Status FieldError(const FieldLines& lines, absl::string_view field,
                        absl::string_view problem) {
  auto it = lines.find(field);
  if (it == lines.end()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem, " (line ", it->second, ")"));
}

std::string FormatNumber(double value) {
  // Plain decimals where they stay short ("0.0001" rather than "1e-04"), exponents for
  // the rest ("5e-324"). Both are the shortest digits that read back as `value`.
  constexpr size_t kMaxFixed = 12;
  char buffer[400];  // the longest fixed form, DBL_MAX, has 309 digits
  auto fixed = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::fixed);
  if (fixed.ec == std::errc() && static_cast<size_t>(fixed.ptr - buffer) <= kMaxFixed) {
    return std::string(buffer, fixed.ptr);
  }
  auto shortest = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, shortest.ptr);
}

}  // namespace cohort::job
