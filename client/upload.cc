#include "client/upload.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/transfer/file_chunks.h"
#include "common/transfer/sha256.h"
#include "proto/grpc_status.h"

namespace cohort::client {

absl::StatusOr<std::string> UploadFile(v1::JobService::Stub& stub, const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", error.message()));
  absl::StatusOr<std::string> sha = Sha256OfFile(path);
  if (!sha.ok()) return sha.status();

  grpc::ClientContext context;
  v1::UploadDataResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::UploadChunk>> writer = stub.UploadData(&context, &response);
  v1::UploadChunk first;
  first.mutable_header()->set_file_name(std::filesystem::path(path).filename().string());
  first.mutable_header()->set_size_bytes(static_cast<int64_t>(size));
  first.mutable_header()->set_sha256(*sha);
  bool header_sent = false;
  absl::Status sent = SendFileChunks(path, 0, [&](absl::string_view data, int64_t, int64_t) {
    v1::UploadChunk chunk = header_sent ? v1::UploadChunk() : first;
    chunk.set_data(std::string(data));
    header_sent = true;
    return writer->Write(chunk);
  });
  if (sent.ok() && !header_sent) {
    sent = writer->Write(first) ? absl::OkStatus() : absl::CancelledError("the receiver went away");
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) {
    absl::Status s = FromGrpcStatus(status);
    return absl::Status(s.code(), absl::StrCat("uploading ", path, ": ", s.message()));
  }
  if (!sent.ok()) return absl::Status(sent.code(), absl::StrCat("uploading ", path, ": ", sent.message()));
  return response.artifact_id();
}

absl::Status UploadSpecFiles(v1::JobService::Stub& stub, v1::JobSpec& spec,
                             const std::function<void(const std::string&, const std::string&)>&
                                 on_upload) {
  // Every file must be readable before anything is sent: a typo fails fast, locally.
  std::vector<std::string> paths{spec.keras_path(), spec.config_json_path(), spec.data().x().path(),
                                 spec.data().y().path(), spec.data().validation_x().path(),
                                 spec.data().validation_y().path()};
  for (const std::string& path : paths) {
    if (path.empty()) continue;
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) {
      return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    }
    std::fclose(file);
  }
  std::map<std::string, std::string> uploaded;  // path -> artifact id
  auto upload = [&](const std::string& path) -> absl::StatusOr<std::string> {
    auto it = uploaded.find(path);
    if (it != uploaded.end()) return it->second;
    absl::StatusOr<std::string> id = UploadFile(stub, path);
    if (!id.ok()) return id.status();
    uploaded[path] = *id;
    if (on_upload) on_upload(path, *id);
    return *id;
  };
  if (spec.model_case() == v1::JobSpec::kKerasPath ||
      spec.model_case() == v1::JobSpec::kConfigJsonPath) {
    const std::string path =
        spec.has_keras_path() ? spec.keras_path() : spec.config_json_path();
    absl::StatusOr<std::string> id = upload(path);
    if (!id.ok()) return id.status();
    spec.set_model_artifact_id(*id);
  }
  v1::DataSpec* data = spec.mutable_data();
  for (v1::ArrayRef* array : {data->mutable_x(), data->mutable_y()}) {
    if (!array->path().empty()) {
      absl::StatusOr<std::string> id = upload(array->path());
      if (!id.ok()) return id.status();
      array->set_artifact_id(*id);
    }
  }
  if (data->has_validation_x()) {
    for (v1::ArrayRef* array : {data->mutable_validation_x(), data->mutable_validation_y()}) {
      if (!array->path().empty()) {
        absl::StatusOr<std::string> id = upload(array->path());
        if (!id.ok()) return id.status();
        array->set_artifact_id(*id);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort::client
