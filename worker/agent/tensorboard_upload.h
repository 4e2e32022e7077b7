#pragma once

// UploadTensorBoard: rank 0's TensorBoard event files (<out>/tensorboard/train/...,
// worker/trainer/tensorboard_log.h) become artifacts of the job named
// "tensorboard/<run>/<file>", so `cohort download` brings them along. The rank runner
// calls it after every epoch (the trainer flushes the files before its "epoch_end"
// event) and when the rank ends, whatever its outcome, so the curves so far can be
// downloaded from a running, failed or cancelled job.
//
// `sent` (may be null) maps a file's path to its size when it was last uploaded: event
// files only grow, so a file whose size has not changed is not sent again. Best effort:
// the curves are a convenience, so a file that fails to upload is logged, left out of
// `sent` (the next call tries again) and skipped, and the job's outcome does not
// change. Returns how many files were uploaded. Thread-compatible (the rank's thread).

#include <cstdint>
#include <map>
#include <string>

#include "cohort/v1/worker_service.grpc.pb.h"
#include "worker/agent/artifact_transfer.h"

namespace cohort::agent {

int UploadTensorBoard(v1::WorkerService::StubInterface* stub, const v1::RankRef& rank,
                      const std::string& out_dir, const TransferOptions& options,
                      std::map<std::string, int64_t>* sent = nullptr);

}  // namespace cohort::agent
