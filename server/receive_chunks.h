#pragma once

// The receiving half of the client-streaming uploads (JobService.UploadData,
// WorkerService.UploadArtifact): the chunk already read (it carried the header) and
// every chunk after it go into `receiver`, which checks size and digest on Commit (and
// lets `accept` decide on a job artifact: ArtifactStore::Receiver::Commit).

#include <grpcpp/support/sync_stream.h>

#include <memory>

#include "absl/status/statusor.h"
#include "cohort/v1/types.pb.h"
#include "server/artifact_store.h"

namespace cohort::server {

// `Chunk` is a message with a `data` field (UploadChunk, ArtifactChunk).
template <typename Chunk>
absl::StatusOr<v1::ArtifactInfo> ReceiveChunks(
    absl::StatusOr<std::unique_ptr<ArtifactStore::Receiver>> receiver, Chunk& first,
    grpc::ServerReaderInterface<Chunk>* reader,
    const ArtifactStore::Receiver::Accept& accept = nullptr) {
  if (!receiver.ok()) return receiver.status();
  do {
    if (absl::Status s = (*receiver)->Append(first.data()); !s.ok()) return s;
  } while (reader->Read(&first));
  return (*receiver)->Commit(accept);
}

}  // namespace cohort::server
