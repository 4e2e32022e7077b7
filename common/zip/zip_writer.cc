#include "common/zip/zip_writer.h"

#include <zlib.h>

#include <algorithm>
#include <ctime>
#include <new>

#include "absl/strings/str_cat.h"
#include "common/zip/zip_format.h"

namespace cohort::zip {
namespace {

using internal::kZip64Marker16;
using internal::kZip64Marker32;
using internal::Put16;
using internal::Put32;
using internal::Put64;

constexpr size_t kZlibSlice = size_t{1} << 30;
constexpr uint16_t kMadeByUnix = 3 << 8;
constexpr uint32_t kRegularFileAttributes = 0100644u << 16;  // -rw-r--r--

bool NeedsZip64(uint64_t value) { return value >= kZip64Marker32; }

bool IsAscii(absl::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace

absl::StatusOr<std::unique_ptr<ZipWriter>> ZipWriter::Create(const std::string& path,
                                                             Options options) {
  if (options.deflate_level < 1 || options.deflate_level > 9) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": deflate level ", options.deflate_level, " is not in 1..9"));
  }
  absl::StatusOr<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  // MS-DOS time: local time, 2-second resolution, years from 1980.
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  int year = std::max(tm.tm_year + 1900, 1980);
  auto dos_time = static_cast<uint16_t>((tm.tm_hour << 11) | (tm.tm_min << 5) | (tm.tm_sec / 2));
  auto dos_date = static_cast<uint16_t>(((year - 1980) << 9) | ((tm.tm_mon + 1) << 5) | tm.tm_mday);
  return std::unique_ptr<ZipWriter>(
      new ZipWriter(path, *std::move(file), options, dos_time, dos_date));
}

ZipWriter::~ZipWriter() = default;  // AtomicFile removes an uncommitted file

absl::Status ZipWriter::Fail(absl::Status error) {
  file_.reset();
  error_ = error;
  return error;
}

absl::StatusOr<std::string> ZipWriter::Deflate(absl::string_view name,
                                               absl::string_view data) const {
  z_stream zs{};
  if (deflateInit2(&zs, options_.deflate_level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return absl::InternalError(absl::StrCat(path_, ": entry '", name, "': cannot initialise zlib"));
  }
  std::string out;
  try {
    out.resize(deflateBound(&zs, data.size()));
  } catch (const std::bad_alloc&) {
    deflateEnd(&zs);
    return absl::ResourceExhaustedError(
        absl::StrCat(path_, ": entry '", name, "': out of memory compressing ", data.size(), " bytes"));
  }
  auto* in = reinterpret_cast<const Bytef*>(data.data());
  auto* in_end = in + data.size();
  auto* out_begin = reinterpret_cast<Bytef*>(out.data());
  auto* out_end = out_begin + out.size();
  zs.next_in = const_cast<Bytef*>(in);
  zs.next_out = out_begin;
  int rc;
  do {
    zs.avail_in = static_cast<uInt>(std::min<size_t>(kZlibSlice, in_end - zs.next_in));
    zs.avail_out = static_cast<uInt>(std::min<size_t>(kZlibSlice, out_end - zs.next_out));
    bool last = zs.next_in + zs.avail_in == in_end;
    rc = deflate(&zs, last ? Z_FINISH : Z_NO_FLUSH);
  } while (rc == Z_OK);
  out.resize(zs.next_out - out_begin);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    return absl::InternalError(absl::StrCat(path_, ": entry '", name, "': deflate failed (", rc, ")"));
  }
  return out;
}

absl::Status ZipWriter::Add(absl::string_view name, absl::string_view data, Method method) {
  if (file_ == nullptr) {
    return error_.ok() ? absl::FailedPreconditionError(absl::StrCat(path_, ": already finished"))
                       : error_;
  }
  auto error = [&](absl::string_view what) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(path_, ": ", what)));
  };
  if (absl::Status s = internal::ValidateEntryName(name); !s.ok()) return error(s.message());
  if (name.back() == '/') return error(absl::StrCat("entry name '", name, "' is a directory"));
  if (name.size() > 0xFFFF) return error(absl::StrCat("entry name of ", name.size(), " bytes is too long"));
  if (names_.count(std::string(name)) > 0) {
    return error(absl::StrCat("entry '", name, "' added twice"));
  }
  if (method != Method::kStored && method != Method::kDeflate) {
    return error(absl::StrCat("entry '", name, "': cannot write compression ", MethodName(method)));
  }

  ZipEntry entry;
  entry.name = std::string(name);
  entry.method = method;
  entry.flags = IsAscii(name) ? 0 : internal::kFlagUtf8;
  entry.crc32 = internal::Crc32(data);
  entry.uncompressed_size = data.size();
  std::string compressed;
  if (method == Method::kDeflate) {
    absl::StatusOr<std::string> deflated = Deflate(name, data);
    if (!deflated.ok()) return Fail(deflated.status());
    compressed = *std::move(deflated);
    data = compressed;
  }
  entry.compressed_size = data.size();

  bool zip64 = options_.force_zip64 || NeedsZip64(entry.uncompressed_size) ||
               NeedsZip64(entry.compressed_size);
  std::string header;
  Put32(header, internal::kLocalHeaderSignature);
  Put16(header, zip64 ? internal::kVersionZip64 : internal::kVersionDefault);
  Put16(header, entry.flags);
  Put16(header, static_cast<uint16_t>(method));
  Put16(header, dos_time_);
  Put16(header, dos_date_);
  Put32(header, entry.crc32);
  Put32(header, zip64 ? kZip64Marker32 : static_cast<uint32_t>(entry.compressed_size));
  Put32(header, zip64 ? kZip64Marker32 : static_cast<uint32_t>(entry.uncompressed_size));
  Put16(header, static_cast<uint16_t>(name.size()));
  Put16(header, zip64 ? 20 : 0);
  header.append(name.data(), name.size());
  if (zip64) {
    Put16(header, internal::kZip64ExtraId);
    Put16(header, 16);
    Put64(header, entry.uncompressed_size);
    Put64(header, entry.compressed_size);
  }
  uint64_t offset = file_->size();
  entry.data_offset = offset + header.size();
  if (absl::Status s = file_->Append(header); !s.ok()) return Fail(s);
  if (absl::Status s = file_->Append(data); !s.ok()) return Fail(s);
  names_.insert(entry.name);
  entries_.push_back(std::move(entry));
  local_offsets_.push_back(offset);
  return absl::OkStatus();
}

void ZipWriter::AppendCentralDirectory(std::string& out) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const ZipEntry& e = entries_[i];
    uint64_t offset = local_offsets_[i];
    bool force = options_.force_zip64;
    bool big_u = force || NeedsZip64(e.uncompressed_size);
    bool big_c = force || NeedsZip64(e.compressed_size);
    bool big_o = force || NeedsZip64(offset);
    uint16_t extra_length = (big_u || big_c || big_o) ? 4 + 8 * (big_u + big_c + big_o) : 0;
    uint16_t version = extra_length > 0 ? internal::kVersionZip64 : internal::kVersionDefault;
    Put32(out, internal::kCentralHeaderSignature);
    Put16(out, kMadeByUnix | version);
    Put16(out, version);
    Put16(out, e.flags);
    Put16(out, static_cast<uint16_t>(e.method));
    Put16(out, dos_time_);
    Put16(out, dos_date_);
    Put32(out, e.crc32);
    Put32(out, big_c ? kZip64Marker32 : static_cast<uint32_t>(e.compressed_size));
    Put32(out, big_u ? kZip64Marker32 : static_cast<uint32_t>(e.uncompressed_size));
    Put16(out, static_cast<uint16_t>(e.name.size()));
    Put16(out, extra_length);
    Put16(out, 0);  // comment length
    Put16(out, 0);  // disk number
    Put16(out, 0);  // internal attributes
    Put32(out, kRegularFileAttributes);
    Put32(out, big_o ? kZip64Marker32 : static_cast<uint32_t>(offset));
    out += e.name;
    if (extra_length > 0) {
      Put16(out, internal::kZip64ExtraId);
      Put16(out, extra_length - 4);
      if (big_u) Put64(out, e.uncompressed_size);
      if (big_c) Put64(out, e.compressed_size);
      if (big_o) Put64(out, offset);
    }
  }
}

absl::Status ZipWriter::Finish() {
  if (file_ == nullptr) {
    return error_.ok() ? absl::FailedPreconditionError(absl::StrCat(path_, ": already finished"))
                       : error_;
  }
  uint64_t directory_offset = file_->size();
  std::string tail;
  AppendCentralDirectory(tail);
  uint64_t directory_size = tail.size();
  uint64_t count = entries_.size();
  if (options_.force_zip64 || count >= kZip64Marker16 || NeedsZip64(directory_offset) ||
      NeedsZip64(directory_size)) {
    uint64_t record_offset = directory_offset + directory_size;
    Put32(tail, internal::kZip64EndSignature);
    Put64(tail, internal::kZip64EndSize - 12);  // the size of the rest of the record
    Put16(tail, kMadeByUnix | internal::kVersionZip64);
    Put16(tail, internal::kVersionZip64);
    Put32(tail, 0);  // this disk
    Put32(tail, 0);  // the directory's disk
    Put64(tail, count);
    Put64(tail, count);
    Put64(tail, directory_size);
    Put64(tail, directory_offset);
    Put32(tail, internal::kZip64LocatorSignature);
    Put32(tail, 0);  // the record's disk
    Put64(tail, record_offset);
    Put32(tail, 1);  // disks in all
  }
  Put32(tail, internal::kEndSignature);
  Put16(tail, 0);
  Put16(tail, 0);
  Put16(tail, static_cast<uint16_t>(std::min<uint64_t>(count, kZip64Marker16)));
  Put16(tail, static_cast<uint16_t>(std::min<uint64_t>(count, kZip64Marker16)));
  Put32(tail, static_cast<uint32_t>(std::min<uint64_t>(directory_size, kZip64Marker32)));
  Put32(tail, static_cast<uint32_t>(std::min<uint64_t>(directory_offset, kZip64Marker32)));
  Put16(tail, 0);  // comment length
  if (absl::Status s = file_->Append(tail); !s.ok()) return Fail(s);
  absl::Status s = file_->Commit();
  file_.reset();
  if (!s.ok()) error_ = s;
  return s;
}

}  // namespace cohort::zip
