#include "common/npy/npy_array.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/zip/zip_reader.h"

namespace cohort::npy {
absl::StatusOr<std::unique_ptr<NpyArray>> NpyArray::FromBytes(std::string source,
                                                              std::unique_ptr<MappedFile> map,
                                                              std::string owned) {
  auto array = std::unique_ptr<NpyArray>(new NpyArray());
  array->source_ = std::move(source);
  array->map_ = std::move(map);
  array->owned_ = std::move(owned);
  absl::string_view bytes = array->map_ ? array->map_->view() : absl::string_view(array->owned_);
  const std::string& src = array->source_;

  absl::StatusOr<NpyHeader> header = ParseNpyHeader(bytes, src);
  if (!header.ok()) return header.status();
  uint64_t actual = bytes.size() - header->data_offset;
  if (actual != header->data_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        src, ": shape ", ShapeString(header->shape), " of ", DTypeName(header->dtype), " needs ",
        header->data_bytes, " bytes of data but the file holds ", actual,
        actual < header->data_bytes ? " (truncated)" : " (trailing bytes)"));
  }
  if (header->shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        src, ": a 0-d array (shape ()) has no rows; a dataset needs at least one dimension"));
  }
  if (header->shape[0] == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": shape ", ShapeString(header->shape), " has zero rows"));
  }
  array->dtype_ = header->dtype;
  array->shape_ = std::move(header->shape);
  array->row_elements_ = 1;
  for (size_t i = 1; i < array->shape_.size(); ++i) array->row_elements_ *= array->shape_[i];
  array->data_ = bytes.data() + header->data_offset;
  return array;
}

absl::StatusOr<std::unique_ptr<NpyArray>> OpenNpy(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> map = MappedFile::Open(path);
  if (!map.ok()) return map.status();
  return NpyArray::FromBytes(path, *std::move(map), "");
}

absl::StatusOr<std::unique_ptr<NpyArray>> OpenNpz(const std::string& path,
                                                  absl::string_view key) {
  absl::StatusOr<std::unique_ptr<zip::ZipReader>> zip = zip::ZipReader::Open(path);
  if (!zip.ok()) return zip.status();
  std::vector<std::string> keys;
  for (const zip::ZipEntry& e : (*zip)->entries()) {
    if (absl::EndsWith(e.name, ".npy")) keys.push_back(e.name.substr(0, e.name.size() - 4));
  }
  std::string member = absl::StrCat(key, ".npy");
  if (key.empty() && keys.size() == 1) member = keys[0] + ".npy";
  const zip::ZipEntry* entry = (*zip)->Find(member);
  if (entry == nullptr) {
    std::string available = keys.empty() ? "none" : absl::StrJoin(keys, ", ");
    if (key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": name the array to use; keys: ", available));
    }
    return absl::NotFoundError(absl::StrCat(path, ": no array '", key, "'; keys: ", available));
  }
  std::string source = absl::StrCat(path, "[", member.substr(0, member.size() - 4), "]");
  if (entry->method == zip::Method::kStored && !entry->encrypted()) {
    absl::StatusOr<std::unique_ptr<MappedFile>> map =
        MappedFile::OpenRange(path, entry->data_offset, entry->uncompressed_size);
    if (!map.ok()) return map.status();
    return NpyArray::FromBytes(std::move(source), *std::move(map), "");
  }
  absl::StatusOr<std::string> bytes = (*zip)->Read(*entry);
  if (!bytes.ok()) return bytes.status();
  return NpyArray::FromBytes(std::move(source), nullptr, *std::move(bytes));
}

absl::StatusOr<std::unique_ptr<NpyArray>> OpenArray(const std::string& path,
                                                    absl::string_view key) {
  if (absl::EndsWith(path, ".npz")) return OpenNpz(path, key);
  if (absl::EndsWith(path, ".npy")) {
    if (!key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": a key ('", key, "') is only for .npz files"));
    }
    return OpenNpy(path);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": unknown array file type; expected a .npy or .npz file"));
}

}  // namespace cohort::npy
