#include "server/database.h"

#include <catch2/catch.hpp>

#include "tests/support/temp_dir.h"

namespace cohort::server {
namespace {

using cohort::testing::ReadFile;
using cohort::testing::TempDir;
using cohort::testing::WriteFile;

TEST_CASE("Database creates a Cohort database and reopens it", "[server]") {
  TempDir dir;
  std::string path = dir.File("cohort.db");
  {
    auto db = Database::Open(path);
    REQUIRE(db.ok());
    REQUIRE((*db)->Exec("INSERT INTO workers VALUES ('w', 'a', x'', 1, 'v', 1, 2)").ok());
  }
  auto db = Database::Open(path);
  REQUIRE(db.ok());
  auto stmt = (*db)->Prepare("SELECT name, last_seen_us FROM workers");
  REQUIRE(stmt.ok());
  REQUIRE(*(*stmt)->Step());
  CHECK((*stmt)->ColumnText(0) == "w");
  CHECK((*stmt)->ColumnInt(1) == 2);
}

TEST_CASE("Database refuses a corrupt file and leaves it untouched", "[server]") {
  TempDir dir;
  std::string path = dir.File("cohort.db");
  std::string garbage(8192, '\x5a');
  WriteFile(path, garbage);
  auto db = Database::Open(path);
  REQUIRE_FALSE(db.ok());
  CHECK(db.status().code() == absl::StatusCode::kFailedPrecondition);
  std::string message(db.status().message());
  CHECK(message.find(path) != std::string::npos);
  CHECK(message.find("corrupt or not an SQLite database") != std::string::npos);
  CHECK(ReadFile(path) == garbage);
}

TEST_CASE("Database refuses another application's SQLite file", "[server]") {
  TempDir dir;
  std::string path = dir.File("other.db");
  {
    auto db = Database::Open(dir.File("scratch.db"));
    REQUIRE(db.ok());
    REQUIRE((*db)->Exec("ATTACH '" + path + "' AS o; CREATE TABLE o.t (x); DETACH o;").ok());
  }
  auto db = Database::Open(path);
  REQUIRE_FALSE(db.ok());
  CHECK(std::string(db.status().message()).find("not Cohort's") != std::string::npos);
}

TEST_CASE("Database refuses a schema newer than it knows", "[server]") {
  TempDir dir;
  std::string path = dir.File("cohort.db");
  {
    auto db = Database::Open(path);
    REQUIRE(db.ok());
    REQUIRE((*db)->Exec("PRAGMA user_version=999").ok());
  }
  auto db = Database::Open(path);
  REQUIRE_FALSE(db.ok());
  CHECK(std::string(db.status().message()).find("newer than this cohort-server") !=
        std::string::npos);
}

}  // namespace
}  // namespace cohort::server
