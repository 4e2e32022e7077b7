#include "worker/agent/artifact_transfer.h"

#include <sys/stat.h>

#include <filesystem>

#include <grpcpp/client_context.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/fault_point.h"
#include "common/logging.h"
#include "common/transfer/file_chunks.h"
#include "common/transfer/sha256.h"
#include "proto/channel.h"
#include "proto/grpc_status.h"

namespace cohort::agent {
namespace {

bool Transient(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsAborted(status) || absl::IsResourceExhausted(status) ||
         absl::IsInternal(status) || absl::IsUnknown(status);
}

absl::Status Prefix(const absl::Status& status, absl::string_view what) {
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

// Reads a stream of DataChunks (FetchData, DownloadArtifact) into `file` from its
// current size on, retrying transient failures from where the last attempt stopped.
// `open(offset, context)` starts the stream.
template <typename Open>
absl::Status ReceiveChunks(ReceivedFile& file, int64_t* total, const std::string& what,
                           const TransferOptions& options, CallCanceller* canceller, Open open) {
  absl::Duration backoff = absl::Milliseconds(100);
  for (int attempt = 1;; ++attempt) {
    auto context = ContextWithDeadline(options.stream_timeout);
    CallCanceller::Scope scope(canceller, context.get());
    auto reader = open(file.size(), context.get());
    v1::DataChunk chunk;
    absl::Status failed;
    while (failed.ok() && reader->Read(&chunk)) {
      if (chunk.offset() != file.size()) {
        failed = absl::DataLossError(absl::StrCat("a chunk came at offset ", chunk.offset(),
                                                  ", expected ", file.size()));
        context->TryCancel();
        break;
      }
      if (chunk.total_bytes() > 0) *total = chunk.total_bytes();
      failed = file.Append(chunk.data());
      if (!failed.ok()) context->TryCancel();
    }
    absl::Status status = FromGrpcStatus(reader->Finish());
    if (!failed.ok()) return Prefix(failed, what);
    if (status.ok()) return absl::OkStatus();
    if (canceller != nullptr && canceller->cancelled()) {
      return absl::CancelledError(absl::StrCat(what, ": cancelled"));
    }
    if (!Transient(status) || attempt >= options.attempts) return Prefix(status, what);
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, options.max_backoff);
  }
}

}  // namespace

absl::Status CheckFileName(absl::string_view name, absl::string_view what) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255 ||
      name.find('/') != absl::string_view::npos || name.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", name, "' is not a valid file name"));
  }
  return absl::OkStatus();
}

DataCache::DataCache(std::string dir, v1::WorkerService::StubInterface* stub,
                     TransferOptions options)
    : dir_(std::move(dir)), stub_(stub), options_(options) {}

absl::StatusOr<std::string> DataCache::Fetch(const v1::DataArtifact& artifact,
                                             CallCanceller* canceller) {
  const std::string& id = artifact.artifact_id();
  if (absl::Status s = CheckFileName(id, "artifact id"); !s.ok()) return s;
  if (artifact.size_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("artifact '", id, "': negative size"));
  }
  std::shared_ptr<absl::Mutex> lock;
  {
    absl::MutexLock guard(&mu_);
    std::shared_ptr<absl::Mutex>& slot = fetching_[id];
    if (!slot) slot = std::make_shared<absl::Mutex>();
    lock = slot;
  }
  absl::MutexLock one_fetch(lock.get());
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", dir_, ": ", ec.message()));
  const std::string path = PathOf(id);
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    // Only checked files are ever moved into the cache (ReceivedFile::Commit), so the
    // size tells a complete file from a damaged one without hashing it again.
    if (S_ISREG(st.st_mode) && st.st_size == artifact.size_bytes()) return path;
    std::filesystem::remove(path, ec);
  }
  if (absl::Status s = FetchInto(artifact, path, canceller); !s.ok()) return s;
  spdlog::info("fetched artifact {} ({} bytes, sha256 checked)", id, artifact.size_bytes());
  return path;
}

absl::Status DataCache::FetchInto(const v1::DataArtifact& artifact, const std::string& path,
                                  CallCanceller* canceller) {
  const std::string what = absl::StrCat("data artifact '", artifact.artifact_id(), "'");
  ReceivedFile::Expect expect;
  expect.what = what;
  expect.size = artifact.size_bytes();
  expect.sha256 = artifact.sha256();
  expect.max_bytes = artifact.size_bytes();
  absl::StatusOr<std::unique_ptr<ReceivedFile>> file = ReceivedFile::Create(path, expect);
  if (!file.ok()) return file.status();
  int64_t total = -1;
  absl::Status received = ReceiveChunks(
      **file, &total, what, options_, canceller, [&](int64_t offset, grpc::ClientContext* context) {
        v1::FetchDataRequest request;
        request.set_artifact_id(artifact.artifact_id());
        request.set_offset(offset);
        return stub_->FetchData(context, request);
      });
  if (!received.ok()) return received;
  absl::StatusOr<std::string> committed = (*file)->Commit();
  return committed.status();
}

absl::Status UploadArtifact(v1::WorkerService::StubInterface* stub, const v1::RankRef& rank,
                            const std::string& name, const std::string& path,
                            TransferOptions options) {
  const std::string what = absl::StrCat("upload of '", name, "'");
  const std::string fault_point =
      absl::StrCat("upload-", std::filesystem::path(name).filename().string());
  absl::StatusOr<std::string> sha = Sha256OfFile(path);
  if (!sha.ok()) return Prefix(sha.status(), what);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(what, ": ", path, ": ", ec.message()));
  absl::Duration backoff = absl::Milliseconds(100);
  for (int attempt = 1;; ++attempt) {
    auto context = ContextWithDeadline(options.stream_timeout);
    v1::ArtifactInfo info;
    auto writer = stub->UploadArtifact(context.get(), &info);
    v1::ArtifactChunk chunk;
    v1::ArtifactHeader* header = chunk.mutable_header();
    *header->mutable_rank() = rank;
    header->set_name(name);
    header->set_size_bytes(static_cast<int64_t>(size));
    header->set_sha256(*sha);
    bool first = true;
    bool broken = false;
    absl::Status sent = SendFileChunks(path, 0, [&](absl::string_view data, int64_t offset, int64_t) {
      if (!first) chunk.clear_header();
      first = false;
      chunk.set_data(std::string(data));
      if (writer->Write(chunk)) {
        // The fault suite kills a process here, with the stream open (mid-upload).
        if (offset == 0) FaultPoint(fault_point);
        return true;
      }
      broken = true;
      return false;
    });
    if (!sent.ok() && !broken) {
      context->TryCancel();
      writer->Finish();
      return Prefix(sent, what);  // the local file went away or cannot be read
    }
    if (first && !broken) broken = !writer->Write(chunk);  // an empty file: the header alone
    if (!broken) writer->WritesDone();
    absl::Status status = FromGrpcStatus(writer->Finish());
    if (status.ok()) return absl::OkStatus();
    if (!Transient(status) || attempt >= options.attempts) return Prefix(status, what);
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, options.max_backoff);
  }
}

absl::Status DownloadJobArtifact(v1::JobService::StubInterface* stub, const std::string& job_id,
                                 const std::string& name, const std::string& path,
                                 TransferOptions options, CallCanceller* canceller) {
  const std::string what = absl::StrCat("download of '", name, "' of job ", job_id);
  ReceivedFile::Expect expect;
  expect.what = what;
  absl::StatusOr<std::unique_ptr<ReceivedFile>> file = ReceivedFile::Create(path, expect);
  if (!file.ok()) return file.status();
  int64_t total = -1;
  absl::Status received = ReceiveChunks(
      **file, &total, what, options, canceller, [&](int64_t offset, grpc::ClientContext* context) {
        v1::DownloadArtifactRequest request;
        request.set_job_id(job_id);
        request.set_name(name);
        request.set_offset(offset);
        return stub->DownloadArtifact(context, request);
      });
  if (!received.ok()) return received;
  if (total >= 0 && (*file)->size() != total) {
    return absl::DataLossError(absl::StrCat(what, ": got ", (*file)->size(), " of ", total, " bytes"));
  }
  return (*file)->Commit().status();
}

}  // namespace cohort::agent
