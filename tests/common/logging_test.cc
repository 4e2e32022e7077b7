#include "common/logging.h"

#include <sstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_split.h"
#include "common/json_log_format.h"

namespace cohort {
namespace {

// A logger named `name` writing JSON lines into `out`.
std::shared_ptr<spdlog::logger> JsonLogger(const std::string& name, std::ostringstream& out) {
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = std::make_shared<spdlog::logger>(name, sink);
  logger->set_formatter(MakeJsonLogFormatter());
  logger->set_level(spdlog::level::trace);
  return logger;
}

// Every line of `text` parsed strictly (throws on anything that is not JSON).
std::vector<nlohmann::json> Lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    lines.push_back(nlohmann::json::parse(line.begin(), line.end()));
  }
  return lines;
}

TEST_CASE("JSON strings are escaped as RFC 8259 asks", "[logging]") {
  CHECK(JsonQuote("plain") == "\"plain\"");
  CHECK(JsonQuote("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(JsonQuote("l1\nl2\r\t") == "\"l1\\nl2\\r\\t\"");
  CHECK(JsonQuote(std::string("\x01\x1f\x7f", 3)) == "\"\\u0001\\u001f\\u007f\"");
  CHECK(JsonQuote(std::string("nul\0x", 5)) == "\"nul\\u0000x\"");
  CHECK(JsonQuote("é ━ 😀") == "\"é ━ 😀\"");
  // Bytes that are not UTF-8 become U+FFFD, one for each.
  CHECK(JsonQuote("\xff" "a\xc3") == "\"\xEF\xBF\xBD" "a\xEF\xBF\xBD\"");
  CHECK(JsonQuote("\xed\xa0\x80") == "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // a surrogate
  CHECK(JsonQuote("\xc0\xaf") == "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");                  // overlong
}

TEST_CASE("JSON log lines carry time, level, logger and message", "[logging]") {
  std::ostringstream out;
  auto logger = JsonLogger("server", out);
  logger->info("job {} queued", "job-7");
  logger->warn("quote \" backslash \\ newline \n tab \t bad \xff end");
  logger->error("{}", std::string("\x02 control", 9));
  std::vector<nlohmann::json> lines = Lines(out.str());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0]["level"] == "info");
  CHECK(lines[0]["logger"] == "server");
  CHECK(lines[0]["message"] == "job job-7 queued");
  CHECK_FALSE(lines[0].contains("job"));
  std::string time = lines[0]["time"];
  CHECK(time.size() == 24);  // 2026-12-03T08:23:02.123Z
  CHECK(time[10] == 'T');
  CHECK(time.back() == 'Z');
  CHECK(lines[1]["level"] == "warning");
  CHECK(lines[1]["message"] == "quote \" backslash \\ newline \n tab \t bad \xEF\xBF\xBD end");
  CHECK(lines[2]["level"] == "error");
  CHECK(lines[2]["message"] == std::string("\x02 control", 9));
  // One object per line: the message's newline stayed escaped.
  std::string text = out.str();
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);
}

TEST_CASE("Lines about a job carry its id, attempt and rank", "[logging]") {
  std::ostringstream out;
  auto logger = JsonLogger("agent", out);
  {
    ScopedJobLogFields job({"job-7", 2, -1});
    logger->info("attempt starts");
    {
      ScopedJobLogFields rank({"job-7", 2, 1});
      logger->info("rank 1 started");
      std::thread other([&] { logger->info("another thread"); });
      other.join();
    }
    logger->info("back to the job");
  }
  logger->info("no job");
  std::vector<nlohmann::json> lines = Lines(out.str());
  REQUIRE(lines.size() == 5);
  CHECK(lines[0]["job"] == "job-7");
  CHECK(lines[0]["attempt"] == 2);
  CHECK_FALSE(lines[0].contains("rank"));
  CHECK(lines[1]["rank"] == 1);
  CHECK(lines[2]["message"] == "another thread");
  CHECK_FALSE(lines[2].contains("job"));
  CHECK(lines[3]["job"] == "job-7");
  CHECK_FALSE(lines[3].contains("rank"));
  CHECK_FALSE(lines[4].contains("job"));
  CHECK(CurrentJobLogFields() == nullptr);
}

TEST_CASE("The log format is text or json", "[logging]") {
  CHECK(*ParseLogFormat("text") == LogFormat::kText);
  CHECK(*ParseLogFormat("json") == LogFormat::kJson);
  absl::StatusOr<LogFormat> bad = ParseLogFormat("xml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "--log-format: 'xml' is not one of text, json");
}

}  // namespace
}  // namespace cohort
