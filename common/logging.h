#pragma once

// Logging for the daemons: spdlog to stderr, one line per event, with the component
// name ("server", "agent") in every line.

#include <spdlog/fmt/fmt.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort {

// Sets the default spdlog logger. `level`: trace, debug, info, warn, error.
absl::Status InitLogging(absl::string_view component, absl::string_view level);

}  // namespace cohort

// Debian's abseil has its own string_view (not std::string_view): teach fmt to print it,
// and Status, so log calls can pass them as they are.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(absl::string_view s, Context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};

template <>
struct fmt::formatter<absl::Status> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(const absl::Status& s, Context& ctx) const {
    std::string text = s.ToString();
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(text), ctx);
  }
};
