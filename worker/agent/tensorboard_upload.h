#pragma once

// UploadTensorBoard: rank 0's TensorBoard event files (<out>/tensorboard/train/...,
// worker/trainer/tensorboard_log.h) become artifacts of the job named
// "tensorboard/<run>/<file>", so `cohort download` brings them along. Best effort: the
// curves are a convenience, so a file that fails to upload is logged and skipped, and
// the job's outcome does not change. Returns how many files were uploaded.
// Thread-compatible (the rank's thread).

#include <string>

#include "cohort/v1/worker_service.grpc.pb.h"
#include "worker/agent/artifact_transfer.h"

namespace cohort::agent {

int UploadTensorBoard(v1::WorkerService::StubInterface* stub, const v1::RankRef& rank,
                      const std::string& out_dir, const TransferOptions& options);

}  // namespace cohort::agent
