#pragma once

// Writes ZIP archives that Python's zipfile (and so Keras and NumPy) reads.
//
// The archive is built in `<path>.tmp-<pid>-<n>` (AtomicFile) and renamed over `path` by Finish()
// (see AtomicFile): readers never see a half-written archive, and after any error, or
// when the writer is destroyed before Finish() succeeds, the temporary file is removed
// and `path` is untouched.
//
// Entries come from memory, each stored or deflated (zlib, raw deflate). ZIP64 records
// are written where a size, an offset or the entry count needs them (or everywhere,
// with Options::force_zip64). Names must be relative, without "..", unique, and not
// end in '/' (no directory entries).
//
// Keras writes `.keras` archives with zipfile.ZipFile(..., "w") and its default
// compression, ZIP_STORED (keras/src/saving/saving_lib.py, Keras 3.15), so that
// model.weights.h5 can be read in place; do the same for `.keras` output. np.savez
// stores, np.savez_compressed deflates.
//
// Thread safety: not thread-safe; one thread uses a ZipWriter.

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/zip/atomic_file.h"
#include "common/zip/zip_entry.h"

namespace cohort::zip {

class ZipWriter {
 public:
  struct Options {
    // Write ZIP64 extra fields for every entry and ZIP64 end records even when nothing
    // needs them (like Python's force_zip64).
    bool force_zip64 = false;
    // zlib level for Method::kDeflate entries, 1 (fast) to 9 (small).
    int deflate_level = 6;
  };

  // Creates the temporary file next to `path`.
  static absl::StatusOr<std::unique_ptr<ZipWriter>> Create(const std::string& path,
                                                           Options options);
  static absl::StatusOr<std::unique_ptr<ZipWriter>> Create(const std::string& path) {
    return Create(path, Options());
  }

  ~ZipWriter();  // removes the temporary file unless Finish() succeeded
  ZipWriter(const ZipWriter&) = delete;
  ZipWriter& operator=(const ZipWriter&) = delete;

  // Appends an entry holding `data`, compressed with `method`. InvalidArgument for a
  // bad or repeated name or an unknown method. After any error the writer is dead:
  // the temporary file is gone and later calls return that first error.
  absl::Status Add(absl::string_view name, absl::string_view data, Method method);

  // Writes the central directory and makes the archive appear at `path`.
  absl::Status Finish();

 private:
  ZipWriter(std::string path, std::unique_ptr<AtomicFile> file, Options options,
            uint16_t dos_time, uint16_t dos_date)
      : path_(std::move(path)), file_(std::move(file)), options_(options),
        dos_time_(dos_time), dos_date_(dos_date) {}
  absl::Status Fail(absl::Status error);
  absl::StatusOr<std::string> Deflate(absl::string_view name, absl::string_view data) const;
  void AppendCentralDirectory(std::string& out) const;

  std::string path_;
  std::unique_ptr<AtomicFile> file_;  // null once finished or failed
  Options options_;
  uint16_t dos_time_, dos_date_;  // every entry's modification time: when Create ran
  std::vector<ZipEntry> entries_;
  std::set<std::string, std::less<>> names_;
  std::vector<uint64_t> local_offsets_;  // of each entry's local header
  absl::Status error_;                   // the first error, once dead
};

}  // namespace cohort::zip
