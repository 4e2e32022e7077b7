#include "common/zip/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

// A read-only descriptor of a regular file, closed on destruction.
struct OpenedFile {
  int fd = -1;
  uint64_t size = 0;
  ~OpenedFile() {
    if (fd >= 0) close(fd);
  }
};

absl::Status OpenRegular(const std::string& path, OpenedFile& file) {
  file.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  struct stat st;
  if (fstat(file.fd, &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  file.size = static_cast<uint64_t>(st.st_size);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  OpenedFile file;
  if (absl::Status s = OpenRegular(path, file); !s.ok()) return s;
  return Map(path, file.fd, 0, file.size);
}

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::OpenRange(const std::string& path,
                                                                  uint64_t offset,
                                                                  uint64_t length) {
  OpenedFile file;
  if (absl::Status s = OpenRegular(path, file); !s.ok()) return s;
  if (offset > file.size || length > file.size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": bytes [", offset, ", ", offset + length,
                                                   ") run past the end of the file (", file.size,
                                                   " bytes)"));
  }
  return Map(path, file.fd, offset, length);
}

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Map(const std::string& path, int fd,
                                                            uint64_t offset, uint64_t length) {
  if (length == 0) return std::unique_ptr<MappedFile>(new MappedFile(path, nullptr, 0, nullptr, 0));
  // mmap wants a page-aligned file offset: map from the page start, point past it.
  uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t start = offset - offset % page;
  size_t map_length = static_cast<size_t>(offset - start + length);
  void* base = mmap(nullptr, map_length, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(start));
  if (base == MAP_FAILED) return absl::ErrnoToStatus(errno, absl::StrCat("cannot map ", path));
  return std::unique_ptr<MappedFile>(new MappedFile(path, base, map_length,
                                                    static_cast<const char*>(base) + (offset - start),
                                                    static_cast<size_t>(length)));
}

MappedFile::~MappedFile() {
  if (base_ != nullptr) munmap(base_, map_length_);
}

}  // namespace cohort
