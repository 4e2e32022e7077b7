#include "server/database.h"

#include "absl/strings/str_cat.h"

namespace cohort::server {
namespace {

// "COHR" in ASCII: marks a file as a Cohort database.
constexpr int64_t kApplicationId = 0x434f4852;

// Schema versions, applied in order; index i brings the schema from version i to i+1.
// Never edit a released entry: add a new one.
constexpr const char* kMigrations[] = {
    // 1: workers known to the coordinator.
    R"sql(
    CREATE TABLE workers (
      name TEXT PRIMARY KEY,
      address TEXT NOT NULL,
      resources BLOB NOT NULL,        -- cohort.v1.WorkerResources, serialized
      state INTEGER NOT NULL,         -- cohort.v1.WorkerState
      version TEXT NOT NULL,
      registered_at_us INTEGER NOT NULL,
      last_seen_us INTEGER NOT NULL
    );
    )sql",
    // 2: the job queue and each job's event log (server/job_store.h).
    R"sql(
    CREATE TABLE jobs (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- submission order
      id TEXT NOT NULL UNIQUE,
      owner TEXT NOT NULL,
      idempotency_key TEXT,                   -- NULL when the submit had none
      state INTEGER NOT NULL,                 -- cohort.v1.JobState
      priority INTEGER NOT NULL,
      workers INTEGER NOT NULL,               -- spec.resources.workers
      device INTEGER NOT NULL,                -- cohort.v1.DeviceType
      created_at_us INTEGER NOT NULL,
      spec BLOB NOT NULL,                     -- cohort.v1.JobSpec without model bytes
      job BLOB NOT NULL                       -- cohort.v1.Job without its spec
    );
    CREATE UNIQUE INDEX jobs_by_key ON jobs (owner, idempotency_key)
      WHERE idempotency_key IS NOT NULL;
    CREATE INDEX jobs_by_state ON jobs (state, priority DESC, seq);
    CREATE TABLE job_events (
      job_id TEXT NOT NULL,
      sequence INTEGER NOT NULL,
      event BLOB NOT NULL,                    -- cohort.v1.JobEvent
      PRIMARY KEY (job_id, sequence)
    ) WITHOUT ROWID;
    )sql",
    // 3: who uploaded which artifact (server/upload_ledger.h).
    R"sql(
    CREATE TABLE uploads (
      artifact_id TEXT NOT NULL,
      owner TEXT NOT NULL,
      size_bytes INTEGER NOT NULL,
      PRIMARY KEY (artifact_id, owner)
    ) WITHOUT ROWID;
    CREATE INDEX uploads_by_owner ON uploads (owner);
    )sql",
};
constexpr int64_t kSchemaVersion = sizeof(kMigrations) / sizeof(kMigrations[0]);

// A corrupt or foreign file is the user's to fix, and the message says how.
absl::Status SqliteError(const std::string& path, int rc, absl::string_view why,
                         absl::string_view what) {
  int primary = rc & 0xff;
  if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is corrupt or not an SQLite database (", why,
                     "); move it away to start with an empty one"));
  }
  if (primary == SQLITE_READONLY || primary == SQLITE_CANTOPEN || primary == SQLITE_IOERR ||
      primary == SQLITE_FULL || primary == SQLITE_PERM) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", what, ": ", why));
  }
  return absl::InternalError(absl::StrCat(path, ": ", what, ": ", why));
}

}  // namespace

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Statement& Statement::Bind(int index, absl::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::BindBlob(int index, absl::string_view bytes) {
  sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(rc, "query failed");
}

absl::Status Statement::Run() {
  absl::StatusOr<bool> row = Step();
  if (!row.ok()) return row.status();
  return absl::OkStatus();
}

int64_t Statement::ColumnInt(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string Statement::ColumnText(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  int size = sqlite3_column_bytes(stmt_, column);
  return data ? std::string(static_cast<const char*>(data), size) : std::string();
}

bool Statement::ColumnIsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string why = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close(raw);
    return absl::FailedPreconditionError(absl::StrCat("cannot open database ", path, ": ", why));
  }
  std::unique_ptr<Database> db(new Database(path, raw));
  sqlite3_busy_timeout(raw, 5000);
  sqlite3_extended_result_codes(raw, 1);

  // Reading the header is what finds a corrupt or foreign file: check before writing.
  auto app = db->Prepare("PRAGMA application_id");
  if (!app.ok()) return app.status();
  auto has_row = (*app)->Step();
  if (!has_row.ok()) return has_row.status();
  int64_t app_id = (*app)->ColumnInt(0);
  auto ver = db->Prepare("PRAGMA user_version");
  if (!ver.ok()) return ver.status();
  if (auto r = (*ver)->Step(); !r.ok()) return r.status();
  int64_t version = (*ver)->ColumnInt(0);
  app->reset();
  ver->reset();

  if (app_id == 0 && version == 0) {
    // A new file, or an empty one: make sure it holds no tables of somebody else's.
    auto tables = db->Prepare("SELECT count(*) FROM sqlite_master");
    if (!tables.ok()) return tables.status();
    if (auto r = (*tables)->Step(); !r.ok()) return r.status();
    if ((*tables)->ColumnInt(0) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is an SQLite database but not Cohort's (no application id)"));
    }
  } else if (app_id != kApplicationId) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is an SQLite database of another application (application_id ",
                     app_id, ")"));
  } else if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " has schema version ", version, ", newer than this cohort-server (",
                     kSchemaVersion, "): upgrade cohort-server"));
  }
  if (absl::Status s = db->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"); !s.ok()) {
    return s;
  }
  if (absl::Status s = db->Migrate(); !s.ok()) return s;
  return db;
}

Database::~Database() { sqlite3_close_v2(db_); }

absl::Status Database::Error(int rc, absl::string_view what) const {
  return SqliteError(path_, rc, sqlite3_errmsg(db_), what);
}

absl::StatusOr<std::unique_ptr<Statement>> Database::Prepare(absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, "cannot prepare statement");
  return std::unique_ptr<Statement>(new Statement(const_cast<Database*>(this), stmt));
}

absl::Status Database::Exec(absl::string_view sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string why = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return SqliteError(path_, rc, why, "statement failed");
  }
  return absl::OkStatus();
}

absl::Status Database::Migrate() {
  auto ver = Prepare("PRAGMA user_version");
  if (!ver.ok()) return ver.status();
  if (auto r = (*ver)->Step(); !r.ok()) return r.status();
  int64_t version = (*ver)->ColumnInt(0);
  ver->reset();
  for (int64_t v = version; v < kSchemaVersion; ++v) {
    std::string sql = absl::StrCat("BEGIN IMMEDIATE;", kMigrations[v],
                                   "PRAGMA application_id=", kApplicationId, ";",
                                   "PRAGMA user_version=", v + 1, "; COMMIT;");
    if (absl::Status s = Exec(sql); !s.ok()) {
      Exec("ROLLBACK").IgnoreError();
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort::server
