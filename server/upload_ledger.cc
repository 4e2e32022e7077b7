#include "server/upload_ledger.h"

namespace cohort::server {

absl::StatusOr<bool> UploadLedger::RecordWithin(const std::string& artifact_id,
                                               const std::string& owner, int64_t size_bytes,
                                               int64_t limit) {
  auto stmt = db_->Prepare(
      "INSERT OR IGNORE INTO uploads (artifact_id, owner, size_bytes) SELECT ?1, ?2, ?3 "
      "WHERE ?4 <= 0 OR (SELECT coalesce(sum(size_bytes), 0) FROM uploads WHERE owner = ?2) "
      "+ ?3 <= ?4");
  if (!stmt.ok()) return stmt.status();
  if (absl::Status s = (*stmt)->Bind(1, artifact_id).Bind(2, owner).Bind(3, size_bytes).Bind(4, limit).Run();
      !s.ok()) {
    return s;
  }
  return Owns(artifact_id, owner);
}

absl::StatusOr<bool> UploadLedger::Owns(const std::string& artifact_id, const std::string& owner) {
  auto stmt = db_->Prepare("SELECT 1 FROM uploads WHERE artifact_id = ?1 AND owner = ?2");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->Bind(1, artifact_id).Bind(2, owner);
  return (*stmt)->Step();
}

absl::StatusOr<int64_t> UploadLedger::BytesOf(const std::string& owner) {
  auto stmt = db_->Prepare("SELECT coalesce(sum(size_bytes), 0) FROM uploads WHERE owner = ?1");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->Bind(1, owner);
  if (auto row = (*stmt)->Step(); !row.ok()) return row.status();
  return (*stmt)->ColumnInt(0);
}

}  // namespace cohort::server
