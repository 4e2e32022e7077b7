#pragma once

// UploadLedger: who uploaded what (table `uploads`, schema version 3), for tenancy
// (docs/security.md). Uploads are content-addressed (artifact_store.h), so two users
// who upload the same bytes share one file; each has its own row, and each may use the
// artifact in a job. A user's uploaded bytes (for --max-upload-bytes-per-user) are the
// sum of the sizes of its rows: the same file uploaded twice by one user counts once.
//
// Thread safety: any thread (the Database serializes statements; each method is one
// statement, but for RecordWithin's closing read).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/database.h"

namespace cohort::server {

class UploadLedger {
 public:
  // `db` (migrated) must outlive the ledger.
  explicit UploadLedger(Database* db) : db_(db) {}

  // Records that `owner` uploaded `artifact_id` of `size_bytes` (again: no change)
  // unless that would take `owner`'s bytes past `limit` (<= 0: no limit), checking and
  // inserting in one statement, so that uploads ending at the same time cannot together
  // pass a limit that each alone is within. Returns whether `owner` has the upload now
  // (false: refused).
  absl::StatusOr<bool> RecordWithin(const std::string& artifact_id, const std::string& owner,
                                    int64_t size_bytes, int64_t limit);
  absl::StatusOr<bool> Owns(const std::string& artifact_id, const std::string& owner);
  // Bytes of every upload `owner` has.
  absl::StatusOr<int64_t> BytesOf(const std::string& owner);

 private:
  Database* const db_;
};

}  // namespace cohort::server
