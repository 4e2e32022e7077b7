#pragma once

// UploadLedger: who uploaded what (table `uploads`, schema version 3), for tenancy
// (docs/security.md). Uploads are content-addressed (artifact_store.h), so two users
// who upload the same bytes share one file; each has its own row, and each may use the
// artifact in a job. A user's uploaded bytes (for --max-upload-bytes-per-user) are the
// sum of the sizes of its rows: the same file uploaded twice by one user counts once.
//
// Thread safety: any thread (the Database serializes statements; each method is one
// statement).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/database.h"

namespace cohort::server {

class UploadLedger {
 public:
  // `db` (migrated) must outlive the ledger.
  explicit UploadLedger(Database* db) : db_(db) {}

  // Records that `owner` uploaded `artifact_id` of `size_bytes` (again: no change).
  absl::Status Record(const std::string& artifact_id, const std::string& owner, int64_t size_bytes);
  absl::StatusOr<bool> Owns(const std::string& artifact_id, const std::string& owner);
  // Bytes of every upload `owner` has.
  absl::StatusOr<int64_t> BytesOf(const std::string& owner);

 private:
  Database* const db_;
};

}  // namespace cohort::server
