#pragma once

// Moving files in chunks over a stream (uploads, downloads, data fetches), free of
// gRPC: callers put each chunk into their own message (DataChunk, UploadChunk, ...).
//
// SendFileChunks reads a file from an offset and hands it out in chunks. ReceivedFile
// is the other end: chunks are appended to a temporary file and hashed as they come;
// Commit() checks the size and the SHA-256 and only then moves the file into place
// atomically (common/zip/atomic_file.h), so a broken, truncated, oversized or tampered
// transfer leaves nothing at the target path.
//
// Thread safety: a ReceivedFile is used by one thread at a time.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/transfer/sha256.h"
#include "common/zip/atomic_file.h"

namespace cohort {

// The largest chunk SendFileChunks hands out: well under gRPC's 4 MiB message limit.
inline constexpr int64_t kTransferChunkBytes = 1 << 20;

// Calls send(data, offset_of_data, file_size) for each chunk of `path` from `offset` to
// the end, in order; an empty file (or offset == size) gives no call. Returns CANCELLED
// when `send` returns false (the peer went away), NOT_FOUND naming the file when it
// cannot be opened, OUT_OF_RANGE for an offset outside [0, size].
absl::Status SendFileChunks(
    const std::string& path, int64_t offset,
    const std::function<bool(absl::string_view data, int64_t offset, int64_t total)>& send);

class ReceivedFile {
 public:
  struct Expect {
    std::string what;         // names the transfer in messages, e.g. "upload 'x.npy'"
    int64_t size = -1;        // the declared size; -1: unknown
    std::string sha256;       // the declared hex digest; empty: not checked
    int64_t max_bytes = -1;   // refuse more than this; -1: no limit
  };

  // Starts receiving into a temporary file beside `path` (whose directory must exist).
  // A declared size above max_bytes is refused at once (RESOURCE_EXHAUSTED), as is a
  // malformed declared digest (INVALID_ARGUMENT).
  static absl::StatusOr<std::unique_ptr<ReceivedFile>> Create(const std::string& path,
                                                             Expect expect);

  // Appends the next bytes. RESOURCE_EXHAUSTED past max_bytes, INVALID_ARGUMENT past the
  // declared size; after an error the temporary file is gone and later calls fail.
  absl::Status Append(absl::string_view bytes);
  // Bytes received so far.
  int64_t size() const { return size_; }

  // Checks the size (INVALID_ARGUMENT when short of the declared one) and the digest
  // (DATA_LOSS on a mismatch), then makes the file visible at its path. Returns the
  // file's hex SHA-256. Call at most once.
  absl::StatusOr<std::string> Commit();

 private:
  ReceivedFile(std::unique_ptr<AtomicFile> file, Expect expect)
      : file_(std::move(file)), expect_(std::move(expect)) {}

  std::unique_ptr<AtomicFile> file_;
  Expect expect_;
  Sha256 hash_;
  int64_t size_ = 0;
  bool failed_ = false;
};

}  // namespace cohort
