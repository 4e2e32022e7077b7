#include "worker/agent/tensorboard_upload.h"

#include <filesystem>
#include <system_error>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace cohort::agent {

int UploadTensorBoard(v1::WorkerService::StubInterface* stub, const v1::RankRef& rank,
                      const std::string& out_dir, const TransferOptions& options,
                      std::map<std::string, int64_t>* sent) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(out_dir) / "tensorboard";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return 0;
  int uploaded = 0;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    // Regular files only, never a symlink: whatever the folder holds, nothing from
    // outside it is sent.
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    const std::string path = it->path().string();
    const int64_t size = static_cast<int64_t>(it->file_size(ec));
    if (ec) continue;
    if (sent != nullptr) {
      auto known = sent->find(path);
      if (known != sent->end() && known->second == size) continue;
    }
    std::string name = "tensorboard/" + fs::relative(it->path(), root, ec).generic_string();
    absl::Status s = UploadArtifact(stub, rank, name, path, options);
    if (s.ok()) {
      ++uploaded;
      if (sent != nullptr) (*sent)[path] = size;
    } else {
      spdlog::warn("job {} rank {}: TensorBoard file not uploaded: {}", rank.job_id(), rank.rank(), s);
    }
  }
  return uploaded;
}

}  // namespace cohort::agent
