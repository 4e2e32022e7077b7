#include "common/json_log_format.h"

#include <chrono>
#include <ctime>

#include <spdlog/details/log_msg.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace cohort {
namespace {

// The length of the valid UTF-8 sequence at the start of `s` (1 to 4), or 0.
size_t Utf8Length(absl::string_view s) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  auto continuation = [&](size_t i) { return i < s.size() && (byte(i) & 0xC0) == 0x80; };
  unsigned char c = byte(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return continuation(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!continuation(1) || !continuation(2)) return 0;
    if (c == 0xE0 && byte(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && byte(1) >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return 0;
    if (c == 0xF0 && byte(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && byte(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    auto since_epoch = msg.time.time_since_epoch();
    auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds);
    std::time_t t = static_cast<std::time_t>(seconds.count());
    std::tm utc;
    gmtime_r(&t, &utc);
    std::string line = absl::StrFormat(
        "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\",\"level\":\"%s\",\"logger\":%s,"
        "\"message\":%s",
        utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
        static_cast<int>(millis.count()),
        std::string(spdlog::level::to_string_view(msg.level).data(),
                    spdlog::level::to_string_view(msg.level).size()),
        JsonQuote(absl::string_view(msg.logger_name.data(), msg.logger_name.size())),
        JsonQuote(absl::string_view(msg.payload.data(), msg.payload.size())));
    if (const JobLogFields* fields = CurrentJobLogFields()) {
      if (!fields->job_id.empty()) absl::StrAppend(&line, ",\"job\":", JsonQuote(fields->job_id));
      if (fields->attempt >= 0) absl::StrAppend(&line, ",\"attempt\":", fields->attempt);
      if (fields->rank >= 0) absl::StrAppend(&line, ",\"rank\":", fields->rank);
    }
    line += "}\n";
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLogFormatter>();
  }
};

}  // namespace

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  while (!text.empty()) {
    unsigned char c = static_cast<unsigned char>(text[0]);
    size_t n = Utf8Length(text);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD for a byte that starts no valid sequence
      text.remove_prefix(1);
      continue;
    }
    if (n > 1) {
      out.append(text.data(), n);
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
    text.remove_prefix(n);
  }
  out += '"';
  return out;
}

std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter() {
  return std::make_unique<JsonLogFormatter>();
}

}  // namespace cohort
