#include "common/transfer/file_chunks.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace cohort {

absl::Status SendFileChunks(
    const std::string& path, int64_t offset,
    const std::function<bool(absl::string_view data, int64_t offset, int64_t total)>& send) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(file, &std::fclose);
  if (std::fseek(file, 0, SEEK_END) != 0) {
    return absl::DataLossError(absl::StrCat("cannot seek in ", path));
  }
  const int64_t total = std::ftell(file);
  if (offset < 0 || offset > total) {
    return absl::OutOfRangeError(
        absl::StrCat("offset ", offset, " is outside the file's ", total, " bytes"));
  }
  std::fseek(file, offset, SEEK_SET);
  std::string buffer(kTransferChunkBytes, '\0');
  while (offset < total) {
    size_t n = std::fread(buffer.data(), 1, buffer.size(), file);
    if (n == 0) return absl::DataLossError(absl::StrCat("error reading ", path));
    if (!send(absl::string_view(buffer.data(), n), offset, total)) {
      return absl::CancelledError("the receiver went away");
    }
    offset += static_cast<int64_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ReceivedFile>> ReceivedFile::Create(const std::string& path,
                                                                   Expect expect) {
  if (expect.max_bytes >= 0 && expect.size > expect.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(expect.what, ": ", expect.size,
                                                     " bytes is more than the limit of ",
                                                     expect.max_bytes, " bytes"));
  }
  if (!expect.sha256.empty() && !IsSha256Hex(expect.sha256)) {
    return absl::InvalidArgumentError(
        absl::StrCat(expect.what, ": sha256 must be 64 lowercase hex digits"));
  }
  absl::StatusOr<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<ReceivedFile>(new ReceivedFile(std::move(*file), std::move(expect)));
}

absl::Status ReceivedFile::Append(absl::string_view bytes) {
  if (failed_) return absl::FailedPreconditionError(absl::StrCat(expect_.what, ": already failed"));
  int64_t after = size() + static_cast<int64_t>(bytes.size());
  absl::Status error;
  if (expect_.max_bytes >= 0 && after > expect_.max_bytes) {
    error = absl::ResourceExhaustedError(absl::StrCat(
        expect_.what, ": more than the limit of ", expect_.max_bytes, " bytes"));
  } else if (expect_.size >= 0 && after > expect_.size) {
    error = absl::InvalidArgumentError(
        absl::StrCat(expect_.what, ": more bytes than the declared ", expect_.size));
  }
  if (error.ok()) error = file_->Append(bytes);
  if (!error.ok()) {
    failed_ = true;
    file_.reset();  // removes the temporary file
    return error;
  }
  hash_.Update(bytes);
  size_ = after;
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReceivedFile::Commit() {
  if (failed_) return absl::FailedPreconditionError(absl::StrCat(expect_.what, ": already failed"));
  failed_ = true;  // one Commit only
  if (expect_.size >= 0 && size() != expect_.size) {
    return absl::InvalidArgumentError(absl::StrCat(expect_.what, ": got ", size(),
                                                   " bytes, the declared size is ", expect_.size));
  }
  std::string digest = hash_.HexDigest();
  if (!expect_.sha256.empty() && digest != expect_.sha256) {
    return absl::DataLossError(absl::StrCat(expect_.what, ": sha256 mismatch (declared ",
                                            expect_.sha256, ", received ", digest, ")"));
  }
  if (absl::Status s = file_->Commit(); !s.ok()) return s;
  return digest;
}

}  // namespace cohort
