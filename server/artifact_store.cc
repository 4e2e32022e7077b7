#include "server/artifact_store.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/transfer/sha256.h"
#include "common/zip/atomic_file.h"

namespace cohort::server {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxNameParts = 4;
constexpr size_t kMaxNameLength = 255;

std::string RandomName() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("%016x%016x", rng(), rng());
}

absl::Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

bool IsUploadExtension(absl::string_view ext) {
  return ext == "npy" || ext == "npz" || ext == "keras" || ext == "json";
}

bool IsModelExtension(absl::string_view ext) { return ext == "keras" || ext == "json"; }

absl::Status RenameInto(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    int err = errno;
    std::remove(from.c_str());
    return absl::InternalError(absl::StrCat("cannot move a received file to ", to, ": ",
                                            std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::ArtifactInfo> ArtifactStore::Receiver::Commit(const Accept& accept) {
  if (!file_) return absl::FailedPreconditionError("the transfer has ended");
  int64_t size = file_->size();
  absl::StatusOr<std::string> digest = file_->Commit();
  file_.reset();  // a failed transfer leaves nothing behind, not even in incoming/
  if (!digest.ok()) return digest.status();
  v1::ArtifactInfo info;
  info.set_size_bytes(size);
  info.set_sha256(*digest);
  if (!final_dir_.empty()) {
    info.set_name(absl::StrCat(*digest, ".", name_));
    std::string target = absl::StrCat(final_dir_, "/", info.name());
    // The same content may already be there: one artifact either way.
    if (absl::Status s = RenameInto(temp_path_, target); !s.ok()) return s;
    return info;
  }
  info.set_name(name_);
  bool published = false;
  const Publish publish = [&]() -> absl::Status {
    if (absl::Status s = MakeDirs(fs::path(final_path_).parent_path().string()); !s.ok()) {
      return s;
    }
    published = true;  // RenameInto deletes the received file when it fails
    return RenameInto(temp_path_, final_path_);
  };
  absl::Status status = accept ? accept(info, publish) : publish();
  if (!published) std::remove(temp_path_.c_str());  // refused: nothing stays behind
  if (!status.ok()) return status;
  return info;
}

absl::StatusOr<std::unique_ptr<ArtifactStore>> ArtifactStore::Create(const std::string& data_dir,
                                                                     ArtifactStoreOptions options) {
  for (const char* sub : {"artifacts", "jobs", "incoming"}) {
    if (absl::Status s = MakeDirs(absl::StrCat(data_dir, "/", sub)); !s.ok()) return s;
  }
  // Transfers cut short by a previous process are of no use to anyone.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(absl::StrCat(data_dir, "/incoming"), ec)) {
    fs::remove_all(entry.path(), ec);
  }
  return std::unique_ptr<ArtifactStore>(new ArtifactStore(data_dir, options));
}

absl::StatusOr<std::string> ArtifactStore::UploadExtension(absl::string_view file_name,
                                                           absl::string_view field) {
  size_t dot = file_name.rfind('.');
  std::string ext =
      dot == absl::string_view::npos ? "" : absl::AsciiStrToLower(file_name.substr(dot + 1));
  if (!IsUploadExtension(ext)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": '", file_name, "' must end in .npy, .npz, .keras or .json"));
  }
  return ext;
}

absl::Status ArtifactStore::CheckJobArtifactName(absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact name '", absl::CHexEscape(name), "' ", why));
  };
  if (name.empty()) return bad("is empty");
  if (name.size() > kMaxNameLength) return bad("is too long");
  if (name.front() == '/') return bad("must be relative");
  std::vector<absl::string_view> parts = absl::StrSplit(name, '/');
  if (static_cast<int>(parts.size()) > kMaxNameParts) return bad("has too many parts");
  for (absl::string_view part : parts) {
    if (part.empty() || part == "." || part == "..") return bad("must not contain '', '.' or '..' parts");
    for (char c : part) {
      if (!absl::ascii_isalnum(c) && c != '.' && c != '-' && c != '_') {
        return bad("may hold only letters, digits, '.', '-', '_' and '/'");
      }
    }
  }
  return absl::OkStatus();
}

bool ArtifactStore::IsArtifactId(absl::string_view id) {
  size_t dot = id.find('.');
  return dot == 64 && IsSha256Hex(id.substr(0, 64)) && IsUploadExtension(id.substr(65));
}

std::string ArtifactStore::UploadIdFor(absl::string_view ext, absl::string_view bytes) {
  Sha256 hash;
  hash.Update(bytes);
  return absl::StrCat(hash.HexDigest(), ".", ext);
}

std::string ArtifactStore::UploadPathFor(const std::string& artifact_id) const {
  return absl::StrCat(data_dir_, "/artifacts/", artifact_id);
}

absl::StatusOr<std::unique_ptr<ArtifactStore::Receiver>> ArtifactStore::StartReceiver(
    const std::string& what, int64_t size, const std::string& sha256, int64_t max_bytes) {
  auto receiver = std::unique_ptr<Receiver>(new Receiver());
  receiver->temp_path_ = absl::StrCat(data_dir_, "/incoming/", RandomName());
  ReceivedFile::Expect expect;
  expect.what = what;
  expect.size = size;
  expect.sha256 = sha256;
  expect.max_bytes = max_bytes;
  absl::StatusOr<std::unique_ptr<ReceivedFile>> file =
      ReceivedFile::Create(receiver->temp_path_, std::move(expect));
  if (!file.ok()) return file.status();
  receiver->file_ = std::move(*file);
  return receiver;
}

absl::StatusOr<std::unique_ptr<ArtifactStore::Receiver>> ArtifactStore::StartUpload(
    absl::string_view file_name, int64_t size, const std::string& sha256) {
  absl::StatusOr<std::string> ext = UploadExtension(file_name, "header.file_name");
  if (!ext.ok()) return ext.status();
  bool model = IsModelExtension(*ext);
  std::string what = absl::StrCat("upload '", file_name, "' (",
                                  model ? "--max-model-bytes" : "--max-upload-bytes", ")");
  auto receiver = StartReceiver(what, size, sha256,
                                model ? options_.max_model_bytes : options_.max_upload_bytes);
  if (!receiver.ok()) return receiver.status();
  (*receiver)->final_dir_ = absl::StrCat(data_dir_, "/artifacts");
  (*receiver)->name_ = *ext;
  return receiver;
}

absl::StatusOr<std::string> ArtifactStore::PutUpload(absl::string_view ext,
                                                     absl::string_view bytes) {
  absl::StatusOr<std::unique_ptr<Receiver>> receiver =
      StartUpload(absl::StrCat("model.", ext), static_cast<int64_t>(bytes.size()), "");
  if (!receiver.ok()) return receiver.status();
  if (absl::Status s = (*receiver)->Append(bytes); !s.ok()) return s;
  absl::StatusOr<v1::ArtifactInfo> info = (*receiver)->Commit();
  if (!info.ok()) return info.status();
  return info->name();
}

absl::StatusOr<std::string> ArtifactStore::UploadPath(const std::string& artifact_id) const {
  if (!IsArtifactId(artifact_id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", absl::CHexEscape(artifact_id),
        "' is not an artifact id (<sha256>.<npy|npz|keras|json>, as UploadData returns)"));
  }
  std::string path = UploadPathFor(artifact_id);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("artifact '", artifact_id, "' not found"));
  }
  return path;
}

absl::StatusOr<v1::DataArtifact> ArtifactStore::DescribeUpload(
    const std::string& artifact_id) const {
  absl::StatusOr<std::string> path = UploadPath(artifact_id);
  if (!path.ok()) return path.status();
  std::error_code ec;
  uintmax_t size = fs::file_size(*path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot stat ", *path, ": ", ec.message()));
  v1::DataArtifact out;
  out.set_artifact_id(artifact_id);
  out.set_file_name(artifact_id);
  out.set_size_bytes(static_cast<int64_t>(size));
  // The name is the digest; a stored file never changes, so no need to hash it again.
  out.set_sha256(artifact_id.substr(0, 64));
  return out;
}

absl::StatusOr<std::unique_ptr<ArtifactStore::Receiver>> ArtifactStore::StartJobArtifact(
    const std::string& job_id, const std::string& name, int64_t size, const std::string& sha256) {
  absl::StatusOr<std::string> path = JobArtifactPath(job_id, name);
  if (!path.ok()) return path.status();
  auto receiver = StartReceiver(absl::StrCat("artifact '", name, "' (--max-upload-bytes)"), size,
                                sha256, options_.max_upload_bytes);
  if (!receiver.ok()) return receiver.status();
  (*receiver)->final_path_ = *path;
  (*receiver)->name_ = name;
  return receiver;
}

absl::StatusOr<std::string> ArtifactStore::JobArtifactPath(const std::string& job_id,
                                                           const std::string& name) const {
  if (absl::Status s = CheckJobArtifactName(job_id); !s.ok() || job_id.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", absl::CHexEscape(job_id), "' is not a job id"));
  }
  if (absl::Status s = CheckJobArtifactName(name); !s.ok()) return s;
  return absl::StrCat(data_dir_, "/jobs/", job_id, "/", name);
}

absl::Status ArtifactStore::VerifyJobArtifact(const std::string& job_id,
                                              const v1::ArtifactInfo& info) const {
  absl::StatusOr<std::string> path = JobArtifactPath(job_id, info.name());
  if (!path.ok()) return path.status();
  std::error_code ec;
  uintmax_t size = fs::file_size(*path, ec);
  if (ec) return absl::DataLossError(absl::StrCat(*path, ": ", ec.message()));
  if (static_cast<int64_t>(size) != info.size_bytes()) {
    return absl::DataLossError(absl::StrCat(*path, " holds ", size, " bytes, ",
                                            info.size_bytes(), " were received"));
  }
  absl::StatusOr<std::string> digest = Sha256OfFile(*path);
  if (!digest.ok()) return absl::DataLossError(digest.status().message());
  if (*digest != info.sha256()) {
    return absl::DataLossError(absl::StrCat(*path, " is damaged: its sha256 is ", *digest,
                                            ", ", info.sha256(), " was received"));
  }
  return absl::OkStatus();
}

}  // namespace cohort::server
