#include "client/download.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/exit_codes.h"
#include "client/job_format.h"
#include "common/transfer/sha256.h"
#include "proto/channel.h"
#include "proto/grpc_status.h"

namespace cohort::client {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// An artifact name is a relative path without "..": it must stay inside the directory.
bool SafeName(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  for (const auto& part : std::filesystem::path(name)) {
    if (part == ".." || part == ".") return false;
  }
  return true;
}

absl::Status SyncDirectory(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return Errno("cannot open " + dir);
  fsync(fd);
  close(fd);
  return absl::OkStatus();
}

// One DownloadArtifact stream from the current end of `fd`'s file. Returns the new
// length, or the stream's error.
absl::StatusOr<int64_t> FetchFrom(v1::JobService::Stub& stub, const std::string& job_id,
                                  const std::string& name, int fd, int64_t offset,
                                  const std::string& part) {
  grpc::ClientContext context;
  v1::DownloadArtifactRequest request;
  request.set_job_id(job_id);
  request.set_name(name);
  request.set_offset(offset);
  auto reader = stub.DownloadArtifact(&context, request);
  v1::DataChunk chunk;
  absl::Status write_error;
  while (reader->Read(&chunk)) {
    if (chunk.offset() != offset) {
      write_error = absl::DataLossError(absl::StrCat("the coordinator sent bytes at offset ",
                                                     chunk.offset(), ", expected ", offset));
      context.TryCancel();
      break;
    }
    const std::string& data = chunk.data();
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = write(fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        write_error = Errno("cannot write " + part);
        break;
      }
      done += static_cast<size_t>(n);
    }
    offset += static_cast<int64_t>(done);
    if (!write_error.ok()) {
      context.TryCancel();
      break;
    }
  }
  grpc::Status status = reader->Finish();
  if (!write_error.ok()) return write_error;
  if (!status.ok()) return FromGrpcStatus(status);
  return offset;
}

}  // namespace

absl::StatusOr<int64_t> DownloadArtifact(v1::JobService::Stub& stub, const std::string& job_id,
                                         const v1::ArtifactInfo& artifact,
                                         const std::string& target) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(target).parent_path(), ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create the directory of ", target, ": ", ec.message()));
  const bool check_sha = IsSha256Hex(artifact.sha256());
  if (check_sha && std::filesystem::exists(target)) {
    absl::StatusOr<std::string> sha = Sha256OfFile(target);
    if (sha.ok() && *sha == artifact.sha256()) return -1;
  }
  const std::string part = target + ".part";
  int fd = open(part.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create " + part);
  off_t length = lseek(fd, 0, SEEK_END);
  if (length < 0 || (artifact.size_bytes() > 0 && length > artifact.size_bytes())) {
    // Longer than the artifact: not a prefix of it. Start over.
    if (ftruncate(fd, 0) != 0) {
      close(fd);
      return Errno("cannot truncate " + part);
    }
    length = 0;
  }
  const int64_t resumed_at = length;
  int64_t offset = length;
  absl::Status error;
  for (int attempt = 0; attempt < 5; ++attempt) {
    absl::StatusOr<int64_t> end = FetchFrom(stub, job_id, artifact.name(), fd, offset, part);
    if (end.ok()) {
      offset = *end;
      error = absl::OkStatus();
      break;
    }
    error = end.status();
    // Keep what arrived and resume from there, unless retrying cannot help.
    offset = lseek(fd, 0, SEEK_END);
    if (error.code() != absl::StatusCode::kUnavailable &&
        error.code() != absl::StatusCode::kDeadlineExceeded &&
        error.code() != absl::StatusCode::kInternal) {
      if (error.code() == absl::StatusCode::kOutOfRange && offset > 0) {
        // The coordinator refused our offset: the .part was not this artifact's.
        (void)!ftruncate(fd, 0);
        offset = 0;
        continue;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500 * (attempt + 1)));
  }
  if (error.ok() && fsync(fd) != 0) error = Errno("cannot sync " + part);
  close(fd);
  if (!error.ok()) return error;
  if (artifact.size_bytes() > 0 && offset != artifact.size_bytes()) {
    return absl::DataLossError(absl::StrCat("downloaded ", offset, " bytes of ", artifact.name(),
                                            ", expected ", artifact.size_bytes(),
                                            "; run the command again to resume"));
  }
  if (check_sha) {
    absl::StatusOr<std::string> sha = Sha256OfFile(part);
    if (!sha.ok()) return sha.status();
    if (*sha != artifact.sha256()) {
      std::filesystem::remove(part, ec);
      if (resumed_at > 0) {
        // The .part we resumed was not a prefix of this artifact (another job's, or
        // damaged): fetch the whole file once more.
        return DownloadArtifact(stub, job_id, artifact, target);
      }
      return absl::DataLossError(absl::StrCat("SHA-256 ", *sha, " does not match the coordinator's ",
                                              artifact.sha256()));
    }
  }
  if (std::rename(part.c_str(), target.c_str()) != 0) return Errno("cannot rename " + part);
  (void)SyncDirectory(std::filesystem::path(target).parent_path().string());
  return offset - resumed_at;
}

int RunDownloadCommand(const Connection& connection, const DownloadOptions& options) {
  auto stub = NewJobStub(connection);
  v1::Job job;
  grpc::Status status = GetJob(connection, *stub, options.job_id, &job);
  if (!status.ok()) return ReportCallError(connection, status);

  const bool defaults = options.names.empty();
  std::vector<std::string> names;
  for (const std::string& name : options.names) {
    if (!absl::EndsWith(name, "/")) {
      names.push_back(name);
      continue;
    }
    // A folder: every artifact under it (e.g. the TensorBoard files of a running job).
    size_t before = names.size();
    for (const v1::ArtifactInfo& a : job.artifacts()) {
      if (absl::StartsWith(a.name(), name)) names.push_back(a.name());
    }
    if (names.size() == before) {
      std::fprintf(stderr, "cohort: error: %s has no artifacts under '%s' (yet; the job is %s)\n",
                   options.job_id.c_str(), name.c_str(), JobStateName(job.state()).c_str());
      return kExitFailed;
    }
  }
  if (defaults) {
    names = {"model.keras", "history.json"};
    // Rank 0's TensorBoard curves come along (docs/observability.md).
    for (const v1::ArtifactInfo& a : job.artifacts()) {
      if (absl::StartsWith(a.name(), "tensorboard/")) names.push_back(a.name());
    }
  }
  std::vector<std::string> available;
  for (const v1::ArtifactInfo& a : job.artifacts()) available.push_back(a.name());

  int code = kExitOk;
  for (const std::string& name : names) {
    if (!SafeName(name)) {
      std::fprintf(stderr, "cohort: error: '%s' is not an artifact name\n", name.c_str());
      return kExitUsage;
    }
    const v1::ArtifactInfo* artifact = nullptr;
    for (const v1::ArtifactInfo& a : job.artifacts()) {
      if (a.name() == name) artifact = &a;
    }
    if (artifact == nullptr) {
      if (defaults && name == "history.json" && code == kExitOk &&
          job.state() == v1::JOB_STATE_SUCCEEDED) {
        continue;  // an older job without a history: the model is what matters
      }
      std::string why = job.state() == v1::JOB_STATE_SUCCEEDED
                            ? ""
                            : absl::StrCat(" (the job is ", JobStateName(job.state()),
                                           "; its model is stored when it SUCCEEDED)");
      std::fprintf(stderr, "cohort: error: %s has no artifact '%s'%s; it has: %s\n",
                   options.job_id.c_str(), name.c_str(), why.c_str(),
                   available.empty() ? "none" : absl::StrJoin(available, ", ").c_str());
      code = kExitFailed;  // the others still come (a running job's curves so far)
      continue;
    }
    const std::string target = (std::filesystem::path(options.out_dir) / name).string();
    absl::StatusOr<int64_t> fetched = DownloadArtifact(*stub, options.job_id, *artifact, target);
    if (!fetched.ok()) {
      if (fetched.status().code() == absl::StatusCode::kUnavailable) {
        return ReportCallError(connection, ToGrpcStatus(fetched.status()));
      }
      std::fprintf(stderr, "cohort: error: %s: %s\n", name.c_str(),
                   std::string(fetched.status().message()).c_str());
      code = kExitFailed;
      continue;
    }
    std::printf("%s (%s)%s\n", target.c_str(), FormatBytes(artifact->size_bytes()).c_str(),
                *fetched < 0 ? ", already there" : "");
  }
  return code;
}

}  // namespace cohort::client
