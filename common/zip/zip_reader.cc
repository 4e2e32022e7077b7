#include "common/zip/zip_reader.h"

#include <zlib.h>

#include <algorithm>
#include <new>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/zip/zip_format.h"

namespace cohort::zip {
namespace {

using internal::Load16;
using internal::Load32;
using internal::Load64;

// zlib counts in 32-bit units; larger buffers go through in slices.
constexpr size_t kZlibSlice = size_t{1} << 30;

// Where the central directory is, from the end records.
struct Directory {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t count = 0;
  uint64_t end = 0;  // where the end records start: nothing of the directory lies past it
};

class Parser {
 public:
  Parser(absl::string_view name, absl::string_view bytes) : name_(name), bytes_(bytes) {}

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": ", what));
  }
  absl::Status EntryError(absl::string_view entry, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": entry '", entry, "': ", what));
  }

  absl::StatusOr<Directory> FindDirectory() const;
  absl::Status ParseEntries(const Directory& dir, std::vector<ZipEntry>& entries) const;

 private:
  // Parses the central header at `pos` into `entry`; sets `next` past it.
  absl::Status ParseCentral(const Directory& dir, uint64_t pos, ZipEntry& entry,
                            uint64_t& next) const;
  // Reads the ZIP64 extra field's values for the fields that hold the marker.
  absl::Status ApplyZip64(absl::string_view entry_name, absl::string_view extra,
                          uint64_t& uncompressed, uint64_t& compressed,
                          uint64_t& local_offset) const;
  absl::Status LocateData(const Directory& dir, uint64_t local_offset, ZipEntry& entry) const;

  absl::string_view name_;
  absl::string_view bytes_;
};

absl::StatusOr<Directory> Parser::FindDirectory() const {
  const uint64_t size = bytes_.size();
  if (size < internal::kEndSize) {
    return Error(absl::StrCat("not a zip file (", size, " bytes, too short for an end record)"));
  }
  // The end record sits at the very end, followed by a comment of up to 64 KiB.
  uint64_t lowest = size > internal::kEndSize + 0xFFFF ? size - internal::kEndSize - 0xFFFF : 0;
  uint64_t pos = size - internal::kEndSize;
  const char* base = bytes_.data();
  for (;; --pos) {
    if (Load32(base + pos) == internal::kEndSignature &&
        pos + internal::kEndSize + Load16(base + pos + 20) <= size) {
      break;
    }
    if (pos == lowest) {
      if (bytes_.substr(0, 4) == absl::string_view("PK\x03\x04", 4)) {
        return Error("truncated zip file (no end of central directory record)");
      }
      return Error("not a zip file (no end of central directory record)");
    }
  }
  const char* end = base + pos;
  uint16_t disk = Load16(end + 4), directory_disk = Load16(end + 6);
  Directory dir;
  dir.count = Load16(end + 10);
  dir.size = Load32(end + 12);
  dir.offset = Load32(end + 16);
  dir.end = pos;
  bool has_locator = pos >= internal::kZip64LocatorSize &&
                     Load32(base + pos - internal::kZip64LocatorSize) ==
                         internal::kZip64LocatorSignature;
  if (has_locator) {
    const char* locator = base + pos - internal::kZip64LocatorSize;
    uint64_t record = Load64(locator + 8);
    if (Load32(locator + 4) != 0 || Load32(locator + 16) > 1) {
      return Error("multi-disk zip archives are not supported");
    }
    if (record > pos - internal::kZip64LocatorSize ||
        pos - internal::kZip64LocatorSize - record < internal::kZip64EndSize ||
        Load32(base + record) != internal::kZip64EndSignature) {
      return Error("corrupt zip64 end of central directory locator");
    }
    const char* z = base + record;
    disk = Load32(z + 16) != 0 ? 1 : 0;
    directory_disk = Load32(z + 20) != 0 ? 1 : 0;
    dir.count = Load64(z + 32);
    dir.size = Load64(z + 40);
    dir.offset = Load64(z + 48);
    dir.end = record;
  }
  if (disk != 0 || directory_disk != 0) return Error("multi-disk zip archives are not supported");
  if (dir.offset > dir.end || dir.size > dir.end - dir.offset) {
    return Error(absl::StrCat("central directory (", dir.size, " bytes at offset ", dir.offset,
                              ") does not fit the file (", size, " bytes); truncated?"));
  }
  if (dir.count > dir.size / internal::kCentralHeaderSize) {
    return Error(absl::StrCat("central directory of ", dir.size, " bytes cannot hold ", dir.count,
                              " entries"));
  }
  return dir;
}

absl::Status Parser::ApplyZip64(absl::string_view entry_name, absl::string_view extra,
                                uint64_t& uncompressed, uint64_t& compressed,
                                uint64_t& local_offset) const {
  bool need_u = uncompressed == internal::kZip64Marker32;
  bool need_c = compressed == internal::kZip64Marker32;
  bool need_o = local_offset == internal::kZip64Marker32;
  if (!need_u && !need_c && !need_o) return absl::OkStatus();
  while (extra.size() >= 4) {
    uint16_t id = Load16(extra.data());
    uint16_t length = Load16(extra.data() + 2);
    if (length > extra.size() - 4) break;
    absl::string_view body = extra.substr(4, length);
    if (id == internal::kZip64ExtraId) {
      // Only the fields whose header value is the marker are present, in this order.
      size_t want = 8 * (need_u + need_c + need_o);
      if (body.size() < want) return EntryError(entry_name, "zip64 extra field is too short");
      const char* p = body.data();
      if (need_u) uncompressed = Load64(p), p += 8;
      if (need_c) compressed = Load64(p), p += 8;
      if (need_o) local_offset = Load64(p);
      return absl::OkStatus();
    }
    extra.remove_prefix(4 + length);
  }
  return EntryError(entry_name, "sizes need a zip64 extra field, which is missing");
}

absl::Status Parser::LocateData(const Directory& dir, uint64_t local_offset,
                                ZipEntry& entry) const {
  if (local_offset > dir.offset || dir.offset - local_offset < internal::kLocalHeaderSize) {
    return EntryError(entry.name, absl::StrCat("local header offset ", local_offset,
                                               " lies outside the entry data area"));
  }
  const char* local = bytes_.data() + local_offset;
  if (Load32(local) != internal::kLocalHeaderSignature) {
    return EntryError(entry.name, absl::StrCat("no local header at offset ", local_offset));
  }
  uint64_t name_length = Load16(local + 26), extra_length = Load16(local + 28);
  uint64_t data_offset = local_offset + internal::kLocalHeaderSize + name_length + extra_length;
  if (data_offset > dir.offset || entry.compressed_size > dir.offset - data_offset) {
    return EntryError(entry.name,
                      absl::StrCat(entry.compressed_size, " bytes of data at offset ", data_offset,
                                   " run past the entry data area (", dir.offset,
                                   " bytes); truncated?"));
  }
  absl::string_view local_name(local + internal::kLocalHeaderSize, name_length);
  if (local_name != entry.name) {
    return EntryError(entry.name, absl::StrCat("local header names it '", local_name, "'"));
  }
  entry.data_offset = data_offset;
  return absl::OkStatus();
}

absl::Status Parser::ParseCentral(const Directory& dir, uint64_t pos, ZipEntry& entry,
                                  uint64_t& next) const {
  const uint64_t dir_end = dir.offset + dir.size;
  if (dir_end - pos < internal::kCentralHeaderSize ||
      Load32(bytes_.data() + pos) != internal::kCentralHeaderSignature) {
    return Error(absl::StrCat("corrupt central directory at offset ", pos));
  }
  const char* h = bytes_.data() + pos;
  uint64_t name_length = Load16(h + 28), extra_length = Load16(h + 30),
           comment_length = Load16(h + 32);
  if (dir_end - pos - internal::kCentralHeaderSize < name_length + extra_length + comment_length) {
    return Error(absl::StrCat("corrupt central directory at offset ", pos));
  }
  next = pos + internal::kCentralHeaderSize + name_length + extra_length + comment_length;
  entry.name.assign(h + internal::kCentralHeaderSize, name_length);
  entry.flags = Load16(h + 8);
  entry.method = static_cast<Method>(Load16(h + 10));
  entry.crc32 = Load32(h + 16);
  entry.compressed_size = Load32(h + 20);
  entry.uncompressed_size = Load32(h + 24);
  uint64_t local_offset = Load32(h + 42);
  if (absl::Status s = internal::ValidateEntryName(entry.name); !s.ok()) {
    return Error(s.message());
  }
  absl::string_view extra(h + internal::kCentralHeaderSize + name_length, extra_length);
  if (absl::Status s = ApplyZip64(entry.name, extra, entry.uncompressed_size,
                                  entry.compressed_size, local_offset);
      !s.ok()) {
    return s;
  }
  if (entry.method == Method::kStored && !entry.encrypted() &&
      entry.compressed_size != entry.uncompressed_size) {
    return EntryError(entry.name, absl::StrCat("stored entry declares ", entry.compressed_size,
                                               " bytes stored but ", entry.uncompressed_size,
                                               " bytes uncompressed"));
  }
  if (entry.method == Method::kDeflate &&
      entry.uncompressed_size / internal::kMaxDeflateRatio > entry.compressed_size) {
    return EntryError(entry.name, absl::StrCat("declares ", entry.uncompressed_size,
                                               " bytes uncompressed from ", entry.compressed_size,
                                               " compressed, more than deflate can expand"));
  }
  return LocateData(dir, local_offset, entry);
}

absl::Status Parser::ParseEntries(const Directory& dir, std::vector<ZipEntry>& entries) const {
  entries.resize(dir.count);
  std::set<absl::string_view> names;
  uint64_t pos = dir.offset;
  for (ZipEntry& entry : entries) {
    if (absl::Status s = ParseCentral(dir, pos, entry, pos); !s.ok()) return s;
  }
  for (const ZipEntry& entry : entries) {
    if (!names.insert(entry.name).second) return EntryError(entry.name, "appears twice");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ZipReader>> ZipReader::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> map = MappedFile::Open(path);
  if (!map.ok()) return map.status();
  auto reader = std::unique_ptr<ZipReader>(new ZipReader(path, (*map)->view()));
  reader->map_ = *std::move(map);
  if (absl::Status s = reader->Parse(); !s.ok()) return s;
  return reader;
}

absl::StatusOr<std::unique_ptr<ZipReader>> ZipReader::FromBuffer(std::string bytes,
                                                                 std::string name) {
  auto reader = std::unique_ptr<ZipReader>(new ZipReader(std::move(name), {}));
  reader->buffer_ = std::move(bytes);
  reader->bytes_ = reader->buffer_;
  if (absl::Status s = reader->Parse(); !s.ok()) return s;
  return reader;
}

absl::Status ZipReader::Parse() {
  Parser parser(name_, bytes_);
  absl::StatusOr<Directory> dir = parser.FindDirectory();
  if (!dir.ok()) return dir.status();
  return parser.ParseEntries(*dir, entries_);
}

const ZipEntry* ZipReader::Find(absl::string_view name) const {
  for (const ZipEntry& entry : entries_) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

absl::StatusOr<std::string> ZipReader::Read(absl::string_view name) const {
  const ZipEntry* entry = Find(name);
  if (entry != nullptr) return Read(*entry);
  std::vector<absl::string_view> names;
  for (const ZipEntry& e : entries_) names.push_back(e.name);
  return absl::NotFoundError(absl::StrCat(name_, ": no entry '", name, "' (entries: ",
                                          names.empty() ? "none" : absl::StrJoin(names, ", "),
                                          ")"));
}

absl::StatusOr<std::string> ZipReader::Read(const ZipEntry& entry) const {
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": entry '", entry.name, "': ", what));
  };
  if (entry.encrypted() || (entry.flags & internal::kFlagStrongEncryption) != 0) {
    return error("is encrypted; encrypted zip entries are not supported");
  }
  absl::string_view data = bytes_.substr(entry.data_offset, entry.compressed_size);
  std::string out;
  if (entry.method == Method::kStored) {
    out.assign(data.data(), data.size());
  } else if (entry.method == Method::kDeflate) {
    // One spare byte detects data that inflates to more than declared.
    try {
      out.resize(entry.uncompressed_size + 1);
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(absl::StrCat(name_, ": entry '", entry.name,
                                                       "': cannot allocate ",
                                                       entry.uncompressed_size, " bytes"));
    }
    z_stream zs{};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return error("cannot initialise zlib");
    auto* in_end = reinterpret_cast<const Bytef*>(data.data() + data.size());
    auto* out_end = reinterpret_cast<Bytef*>(out.data() + out.size());
    zs.next_in = const_cast<Bytef*>(reinterpret_cast<const Bytef*>(data.data()));
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    int rc;
    do {
      zs.avail_in = static_cast<uInt>(std::min<size_t>(kZlibSlice, in_end - zs.next_in));
      zs.avail_out = static_cast<uInt>(std::min<size_t>(kZlibSlice, out_end - zs.next_out));
      rc = inflate(&zs, Z_NO_FLUSH);
    } while (rc == Z_OK);
    size_t produced = reinterpret_cast<char*>(zs.next_out) - out.data();
    std::string zlib_message = zs.msg != nullptr ? zs.msg : "";
    inflateEnd(&zs);
    if (produced > entry.uncompressed_size) {
      return error(absl::StrCat("inflates to more than the declared ", entry.uncompressed_size,
                                " bytes"));
    }
    if (rc == Z_BUF_ERROR) {
      return error(absl::StrCat("deflate data ends early (", produced, " of ",
                                entry.uncompressed_size, " bytes inflated); truncated?"));
    }
    if (rc != Z_STREAM_END) return error(absl::StrCat("corrupt deflate data (", zlib_message, ")"));
    if (produced != entry.uncompressed_size) {
      return error(absl::StrCat("inflates to ", produced, " bytes, not the declared ",
                                entry.uncompressed_size));
    }
    out.resize(produced);
  } else {
    return error(absl::StrCat("compression ", MethodName(entry.method),
                              " is not supported (only stored and deflate)"));
  }
  uint32_t crc = internal::Crc32(out);
  if (crc != entry.crc32) {
    return error(absl::StrCat("CRC-32 mismatch (header says ", absl::Hex(entry.crc32, absl::kZeroPad8),
                              ", data has ", absl::Hex(crc, absl::kZeroPad8), "); corrupt archive"));
  }
  return out;
}

}  // namespace cohort::zip
