#pragma once

// ArtifactStore: the coordinator's files, under the data directory.
//
//   DATA_DIR/artifacts/<sha256 hex>.<npy|npz|keras|json>   uploads (content-addressed)
//   DATA_DIR/jobs/<job_id>/<name>                           what a job left behind
//   DATA_DIR/incoming/                                      transfers in progress
//
// Uploads (JobService.UploadData, and model bytes sent inline with a job) are named by
// their content: the artifact id is "<sha256>.<ext>", the extension taken from the file
// name the client gave, so the same file uploaded twice is one artifact. Job artifacts
// (WorkerService.UploadArtifact) are named by the agent: "model.keras", "history.json",
// "checkpoints/ckpt-epoch-000003.zip"; a name is 1-4 '/'-separated parts of letters,
// digits, '.', '-', '_' (no part "." or ".."), so it can never leave the job's folder.
//
// Every file is received through common/transfer's ReceivedFile into incoming/ and
// renamed into place only once its size and SHA-256 check out: a broken, oversized or
// tampered transfer leaves nothing behind, and a reader never sees half a file.
//
// Limits: data uploads (.npy, .npz) up to max_upload_bytes; models (.keras, .json,
// uploaded or inline) up to max_model_bytes; job artifacts up to max_upload_bytes.
// Past a limit: RESOURCE_EXHAUSTED naming the limit's flag.
//
// Thread safety: all methods may be called from any thread; a Receiver is used by one
// thread at a time.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cohort/v1/worker_service.pb.h"
#include "common/transfer/file_chunks.h"

namespace cohort::server {

struct ArtifactStoreOptions {
  int64_t max_upload_bytes = int64_t{16} << 30;  // --max-upload-bytes
  int64_t max_model_bytes = int64_t{2} << 30;    // --max-model-bytes
};

class ArtifactStore {
 public:
  // An upload in progress. Commit() checks it and moves it into place.
  class Receiver {
   public:
    absl::Status Append(absl::string_view bytes) {
      if (!file_) return absl::FailedPreconditionError("the transfer has ended");
      return file_->Append(bytes);
    }
    // Moves a job artifact into place (replacing one of its name).
    using Publish = std::function<absl::Status()>;
    // Decides whether a checked job artifact is kept: calls `publish` (or refuses, and
    // the received bytes are deleted) and records it, as one step, so that the file in
    // place and the record of it cannot disagree (JobManager::AddArtifact).
    using Accept = std::function<absl::Status(const v1::ArtifactInfo&, const Publish&)>;
    // Returns what was stored: for an upload, name = the artifact id. Call once. A job
    // artifact is moved into place only through `accept` when one is given.
    absl::StatusOr<v1::ArtifactInfo> Commit(const Accept& accept = nullptr);

   private:
    friend class ArtifactStore;
    std::unique_ptr<ReceivedFile> file_;
    std::string temp_path_;
    std::string final_dir_;   // uploads: the artifacts folder; job artifacts: empty
    std::string final_path_;  // job artifacts
    std::string name_;        // job artifacts: the name; uploads: the extension
  };

  // Creates the folders under `data_dir` (which must exist).
  static absl::StatusOr<std::unique_ptr<ArtifactStore>> Create(const std::string& data_dir,
                                                               ArtifactStoreOptions options);

  // "npy", "npz", "keras" or "json" from a file name; INVALID_ARGUMENT naming `field`.
  static absl::StatusOr<std::string> UploadExtension(absl::string_view file_name,
                                                     absl::string_view field);
  // OK for a valid job artifact name, else INVALID_ARGUMENT saying why.
  static absl::Status CheckJobArtifactName(absl::string_view name);
  // True for "<64 hex>.<npy|npz|keras|json>".
  static bool IsArtifactId(absl::string_view id);

  // Starts an upload of `file_name` (its extension picks the limit). `size` -1 and an
  // empty `sha256` mean not declared.
  absl::StatusOr<std::unique_ptr<Receiver>> StartUpload(absl::string_view file_name, int64_t size,
                                                        const std::string& sha256);
  // Stores `bytes` as an upload with extension `ext` ("keras" or "json") at once.
  absl::StatusOr<std::string> PutUpload(absl::string_view ext, absl::string_view bytes);
  // The path of an upload: NOT_FOUND "artifact 'x' not found" when there is none.
  absl::StatusOr<std::string> UploadPath(const std::string& artifact_id) const;
  // Size and SHA-256 of an upload (hashes the file: call once per use).
  absl::StatusOr<v1::DataArtifact> DescribeUpload(const std::string& artifact_id) const;
  // What an upload's id would be, without storing anything.
  static std::string UploadIdFor(absl::string_view ext, absl::string_view bytes);
  std::string UploadPathFor(const std::string& artifact_id) const;

  // Starts receiving job artifact `name` of `job_id` (size/sha256 as above).
  absl::StatusOr<std::unique_ptr<Receiver>> StartJobArtifact(const std::string& job_id,
                                                             const std::string& name,
                                                             int64_t size,
                                                             const std::string& sha256);
  // The path of job artifact `name` (checked, not required to exist).
  absl::StatusOr<std::string> JobArtifactPath(const std::string& job_id,
                                              const std::string& name) const;
  // OK when the stored file of job artifact `info.name()` still has the size and
  // SHA-256 recorded when it was received; DATA_LOSS saying what differs (or that the
  // file is gone) otherwise. Reads the whole file: call it before relying on one, not
  // on every request.
  absl::Status VerifyJobArtifact(const std::string& job_id, const v1::ArtifactInfo& info) const;

  const ArtifactStoreOptions& options() const { return options_; }

 private:
  ArtifactStore(std::string data_dir, ArtifactStoreOptions options)
      : data_dir_(std::move(data_dir)), options_(options) {}
  absl::StatusOr<std::unique_ptr<Receiver>> StartReceiver(const std::string& what, int64_t size,
                                                          const std::string& sha256,
                                                          int64_t max_bytes);

  const std::string data_dir_;
  const ArtifactStoreOptions options_;
};

}  // namespace cohort::server
