#pragma once

// Reads ZIP archives: Keras `.keras` files and NumPy `.npz` files.
//
// Open() maps the file (or takes an in-memory buffer) and parses its central
// directory, ZIP64 records included; it checks every entry's name and local header and
// that its data lies inside the archive, so entries() only lists entries whose bytes
// exist. Read() inflates or copies one entry and checks its size and CRC-32.
//
// Supported: methods stored (0) and deflate (8), ZIP64 (np.savez puts a ZIP64 extra
// field in every local header; the central directory has one only where a size or
// offset needs it), data descriptors (the central directory has the sizes). Refused: multi-disk archives, encrypted entries, other
// methods (at Read), names that are absolute or contain ".." or repeat (at Open).
//
// Errors: NotFound for a missing file or entry; InvalidArgument for anything wrong
// with the bytes. Every message names the archive and, where one is involved, the
// entry. Garbage input gives an error, never a crash.
//
// Thread safety: immutable after Open; any thread may call the const methods
// concurrently.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/zip/mapped_file.h"
#include "common/zip/zip_entry.h"

namespace cohort::zip {

class ZipReader {
 public:
  // Memory-maps `path` and parses it.
  static absl::StatusOr<std::unique_ptr<ZipReader>> Open(const std::string& path);
  // Parses an archive held in memory; `name` is what messages call it.
  static absl::StatusOr<std::unique_ptr<ZipReader>> FromBuffer(std::string bytes,
                                                               std::string name);

  // In central directory order.
  const std::vector<ZipEntry>& entries() const { return entries_; }
  // The entry called exactly `name`, or nullptr.
  const ZipEntry* Find(absl::string_view name) const;

  // The entry's uncompressed bytes, CRC-checked. `entry` must be one of entries().
  // InvalidArgument for an encrypted entry, an unsupported method, corrupt deflate
  // data, a size or CRC-32 mismatch; ResourceExhausted when memory runs out.
  absl::StatusOr<std::string> Read(const ZipEntry& entry) const;
  // Read(*Find(name)), or NotFound naming the archive's entries.
  absl::StatusOr<std::string> Read(absl::string_view name) const;

  // The path given to Open, or the name given to FromBuffer.
  const std::string& name() const { return name_; }

 private:
  ZipReader(std::string name, absl::string_view bytes) : name_(std::move(name)), bytes_(bytes) {}
  absl::Status Parse();

  std::string name_;
  std::unique_ptr<MappedFile> map_;  // set by Open
  std::string buffer_;               // set by FromBuffer
  absl::string_view bytes_;          // the whole archive: map_ or buffer_
  std::vector<ZipEntry> entries_;
};

}  // namespace cohort::zip
