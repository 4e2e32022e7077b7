#pragma once

// A read-only memory map of a whole file or of one byte range of it.
//
// The map is private and read-only; the bytes stay valid until the MappedFile is
// destroyed. Pages are read from disk when first touched, so mapping a large file costs
// nothing until a caller reads it. If another process truncates the file while it is
// mapped, touching the lost pages raises SIGBUS: files handed to Cohort must not be
// rewritten in place (writers here replace files by rename, which is safe).
//
// Thread safety: immutable after Open; any thread may read concurrently.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

class MappedFile {
 public:
  // Maps all of `path`. An empty file gives an empty view. Errors: NotFound when the
  // file is missing, other errno-derived codes when it cannot be opened or mapped.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);

  // Maps `length` bytes of `path` starting at byte `offset` (any offset: the page
  // alignment mmap needs is handled here). InvalidArgument when the range runs past
  // the end of the file.
  static absl::StatusOr<std::unique_ptr<MappedFile>> OpenRange(const std::string& path,
                                                               uint64_t offset, uint64_t length);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  absl::string_view view() const { return absl::string_view(data_, size_); }
  const std::string& path() const { return path_; }

 private:
  // Maps [offset, offset + length) of the open descriptor `fd` (left open).
  static absl::StatusOr<std::unique_ptr<MappedFile>> Map(const std::string& path, int fd,
                                                         uint64_t offset, uint64_t length);
  MappedFile(std::string path, void* base, size_t map_length, const char* data, size_t size)
      : path_(std::move(path)), base_(base), map_length_(map_length), data_(data), size_(size) {}

  std::string path_;
  void* base_;         // what mmap returned, or nullptr for an empty view
  size_t map_length_;  // what was passed to mmap
  const char* data_;   // the first requested byte
  size_t size_;
};

}  // namespace cohort
