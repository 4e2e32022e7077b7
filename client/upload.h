#pragma once

// `cohort submit --upload`: files go to the coordinator's artifact store with
// JobService.UploadData (a header with the name, size and SHA-256, then chunks of at
// most 1 MiB, common/transfer) and the job refers to them by artifact id.

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "cohort/v1/types.pb.h"

namespace cohort::client {

// Uploads the file at `path`; returns its artifact id ("<sha256>.<ext>"). Errors name
// the file; UNAVAILABLE when the coordinator cannot be reached.
absl::StatusOr<std::string> UploadFile(v1::JobService::Stub& stub, const std::string& path);

// Replaces every path of `spec` (the model, each array) by the artifact id of an upload
// of that file, uploading each distinct file once. NOT_FOUND, before anything is sent,
// when a file cannot be read. `on_upload(path, id)` is called
// after each upload (to report progress).
absl::Status UploadSpecFiles(v1::JobService::Stub& stub, v1::JobSpec& spec,
                             const std::function<void(const std::string&, const std::string&)>&
                                 on_upload);

}  // namespace cohort::client
