#include "common/npy/npy_writer.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/npy/npy_header.h"
#include "common/zip/atomic_file.h"

namespace cohort::npy {

absl::Status WriteNpy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                      const void* data) {
  uint64_t bytes = ItemSize(dtype);
  for (int64_t dim : shape) {
    if (dim < 0 || (dim > 0 && bytes > std::numeric_limits<uint64_t>::max() / 2 / dim)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cannot write shape ", ShapeString(shape)));
    }
    bytes *= static_cast<uint64_t>(dim);
  }
  absl::StatusOr<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  if (absl::Status s = (*file)->Append(EncodeNpyHeader(dtype, shape)); !s.ok()) return s;
  if (bytes > 0) {
    absl::string_view body(static_cast<const char*>(data), bytes);
    if (absl::Status s = (*file)->Append(body); !s.ok()) return s;
  }
  return (*file)->Commit();
}

}  // namespace cohort::npy
