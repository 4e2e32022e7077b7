#pragma once

// The coordinator's SQLite database (DIR/cohort.db): open, check, migrate, query.
//
// Open() creates the file when missing, sets WAL journaling and a busy timeout, and
// checks that an existing file is a Cohort database (application_id) of a schema version
// this binary knows, migrating older ones forward. A corrupt file, a foreign SQLite file
// or one from a newer Cohort is refused with a message naming the file; nothing is
// changed in it.
//
// Thread safety: one Database may be used from any thread; statements are serialized
// by an internal mutex (SQLite's own "serialized" mode). Statement objects belong to the
// thread that made them.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace cohort::server {

class Database;

// A prepared statement with positional binds (1-based) and a row cursor.
class Statement {
 public:
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, absl::string_view text);
  Statement& BindBlob(int index, absl::string_view bytes);
  Statement& BindNull(int index);

  // Advances to the next row: true when a row is available, false when done.
  absl::StatusOr<bool> Step();
  // Runs a statement that returns no rows.
  absl::Status Run();

  int64_t ColumnInt(int column) const;
  std::string ColumnText(int column) const;
  bool ColumnIsNull(int column) const;

 private:
  friend class Database;
  Statement(Database* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Database* db_;          // not owned
  sqlite3_stmt* stmt_;    // owned
};

class Database {
 public:
  // Opens (creates) `path`. The parent directory must exist.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path);
  ~Database();

  absl::StatusOr<std::unique_ptr<Statement>> Prepare(absl::string_view sql);
  // Runs one or more statements that return no rows.
  absl::Status Exec(absl::string_view sql);

  const std::string& path() const { return path_; }

 private:
  friend class Statement;
  Database(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  absl::Status Migrate();
  absl::Status Error(int rc, absl::string_view what) const;

  std::string path_;
  sqlite3* db_;  // owned
};

}  // namespace cohort::server
