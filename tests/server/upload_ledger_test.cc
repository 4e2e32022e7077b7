#include "server/upload_ledger.h"

#include <catch2/catch.hpp>

#include <string>

#include "tests/support/temp_dir.h"

namespace cohort::server {
namespace {

using cohort::testing::TempDir;

// RecordWithin checks and inserts in one SQL statement, so uploads ending together
// cannot both pass (a race no test here provokes reliably: SQLite runs each statement
// in microseconds); what a test can hold is the arithmetic of the limit.
TEST_CASE("RecordWithin records an upload only within the user's limit", "[tenancy]") {
  TempDir dir;
  std::unique_ptr<Database> db = *Database::Open(dir.File("cohort.db"));
  UploadLedger ledger(db.get());

  CHECK(*ledger.RecordWithin("a.npy", "alice", 60, 100));
  CHECK_FALSE(*ledger.RecordWithin("b.npy", "alice", 50, 100));  // 110 > 100
  CHECK_FALSE(*ledger.Owns("b.npy", "alice"));
  CHECK(*ledger.RecordWithin("c.npy", "alice", 40, 100));  // exactly 100
  CHECK(*ledger.RecordWithin("a.npy", "alice", 60, 100));  // owned already: counts once
  CHECK(*ledger.BytesOf("alice") == 100);
  CHECK(*ledger.RecordWithin("b.npy", "bob", 50, 100));  // the limit is per user
  CHECK(*ledger.RecordWithin("d.npy", "alice", 1000, 0));  // 0: no limit
}

}  // namespace
}  // namespace cohort::server
