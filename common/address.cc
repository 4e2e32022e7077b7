#include "common/address.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"

namespace cohort {

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

bool HostPort::IsLoopback() const {
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text, bool allow_port_zero) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", text, "' ", why, " (expected HOST:PORT, e.g. 127.0.0.1:7070)"));
  };
  HostPort out;
  absl::string_view port_text;
  if (absl::StartsWith(text, "[")) {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) return bad("has an unclosed '['");
    out.host = std::string(text.substr(1, close - 1));
    if (close + 1 >= text.size() || text[close + 1] != ':') return bad("has no port");
    port_text = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return bad("has no port");
    out.host = std::string(text.substr(0, colon));
    if (out.host.find(':') != std::string::npos) return bad("needs brackets around an IPv6 host");
    port_text = text.substr(colon + 1);
  }
  if (out.host.empty()) return bad("has no host");
  uint32_t port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port > 65535) return bad("has an invalid port");
  if (port == 0 && !allow_port_zero) return bad("has port 0");
  out.port = static_cast<uint16_t>(port);
  return out;
}

}  // namespace cohort
