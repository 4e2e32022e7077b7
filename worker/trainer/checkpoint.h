#pragma once

// Checkpoints: everything needed to continue a run as if it had not stopped, after
// whole epochs. A checkpoint is a zip (readable with numpy.load, as an .npz) holding
// meta.json (epochs done, optimizer iterations, the history so far, the world size and
// seed the RNG streams derive from) and one .npy per tensor: the flat trainable
// parameters, each optimizer slot, each non-trainable variable (moving statistics).
// Random streams (shuffling, dropout) are functions of (seed, epoch, rank), so the
// epoch is their state.
//
// Files are `DIR/ckpt-epoch-000003.zip`, written atomically (temp file, then rename);
// after each write only the newest `keep` remain, and the temporary files of writers
// killed mid-write are removed. Loading tries the newest first and
// falls back to older ones when a file is corrupt (every member's CRC-32 is checked, so
// damaged tensor bytes count) or does not fit the model.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "absl/status/statusor.h"

namespace cohort::trainer {

struct CheckpointState {
  int epochs_done = 0;
  int64_t iterations = 0;
  nlohmann::json history = nlohmann::json::object();
  torch::Tensor params;                 // flat, float32
  std::vector<torch::Tensor> optimizer;  // flat slots
  std::vector<torch::Tensor> buffers;    // non-trainable variables, in model order
};

// Writes `DIR/ckpt-epoch-NNNNNN.zip` for state.epochs_done and returns its path.
absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, const CheckpointState& state,
                                            int keep);

// The newest checkpoint in `dir` that loads and that `fits` accepts; nullopt when
// there is none. Files that fail are reported through `warn` and skipped.
absl::StatusOr<std::optional<CheckpointState>> LoadLatestCheckpoint(
    const std::string& dir, const std::function<absl::Status(const CheckpointState&)>& fits,
    const std::function<void(const std::string&)>& warn);

}  // namespace cohort::trainer
