#include "common/metrics/text_format.h"

#include <charconv>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace cohort::metrics {

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  // Shortest round-trip form; like Go's 'g' with precision -1, exponents from 1e21 up
  // and below 1e-4.
  double magnitude = std::fabs(value);
  std::chars_format format = (magnitude != 0 && (magnitude >= 1e21 || magnitude < 1e-4))
                                 ? std::chars_format::scientific
                                 : std::chars_format::fixed;
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value, format);
  if (ec != std::errc()) {
    end = std::to_chars(buffer, buffer + sizeof(buffer), value).ptr;
  }
  return std::string(buffer, end);
}

namespace {

std::string Escape(absl::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeHelp(absl::string_view help) { return Escape(help, /*quote=*/false); }

std::string EscapeLabelValue(absl::string_view value) { return Escape(value, /*quote=*/true); }

std::string FormatLabels(const std::vector<std::string>& names,
                         const std::vector<std::string>& values) {
  if (names.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    out += EscapeLabelValue(i < values.size() ? values[i] : "");
    out += '"';
  }
  out += '}';
  return out;
}

bool IsValidMetricName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != ':') return false;
  }
  return true;
}

bool IsValidLabelName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(name[0]) || absl::StartsWith(name, "__")) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

}  // namespace cohort::metrics
