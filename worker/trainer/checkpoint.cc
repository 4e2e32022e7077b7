#include "worker/trainer/checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/npy/npy_array.h"
#include "common/npy/npy_header.h"
#include "common/zip/zip_reader.h"
#include "common/zip/zip_writer.h"

namespace cohort::trainer {
namespace {

namespace fs = std::filesystem;

std::string NpyBytes(const torch::Tensor& t) {
  torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
  npy::DType dtype = c.scalar_type() == torch::kFloat32 ? npy::DType::kFloat32 : npy::DType::kInt64;
  if (dtype == npy::DType::kInt64) c = c.to(torch::kLong);
  std::vector<int64_t> shape(c.sizes().begin(), c.sizes().end());
  std::string out = npy::EncodeNpyHeader(dtype, shape);
  out.append(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  return out;
}

absl::StatusOr<torch::Tensor> ReadTensor(const std::string& path, const std::string& key) {
  absl::StatusOr<std::unique_ptr<npy::NpyArray>> a = npy::OpenNpz(path, key);
  if (!a.ok()) return a.status();
  const npy::NpyArray& arr = **a;
  if (arr.dtype() != npy::DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(path, "[", key, "] is not float32"));
  }
  torch::Tensor t = torch::empty(arr.shape(), torch::kFloat32);
  std::memcpy(t.data_ptr(), arr.data(), arr.rows() * arr.row_bytes());
  return t;
}

std::vector<fs::path> CheckpointFiles(const std::string& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (absl::StartsWith(name, "ckpt-epoch-") && absl::EndsWith(name, ".zip")) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());  // zero-padded epochs sort in order
  return files;
}

absl::StatusOr<CheckpointState> Load(const std::string& path) {
  absl::StatusOr<std::unique_ptr<zip::ZipReader>> zip = zip::ZipReader::Open(path);
  if (!zip.ok()) return zip.status();
  absl::StatusOr<std::string> meta_text = (*zip)->Read("meta.json");
  if (!meta_text.ok()) return meta_text.status();
  nlohmann::json meta = nlohmann::json::parse(*meta_text, nullptr, false);
  if (!meta.is_object() || !meta["epochs_done"].is_number_integer() ||
      !meta["optimizer_slots"].is_number_integer() || !meta["buffers"].is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": meta.json is damaged"));
  }
  CheckpointState s;
  s.epochs_done = meta["epochs_done"].get<int>();
  s.iterations = meta["iterations"].get<int64_t>();
  s.history = meta["history"];
  absl::StatusOr<torch::Tensor> params = ReadTensor(path, "params");
  if (!params.ok()) return params.status();
  s.params = *params;
  for (int i = 0; i < meta["optimizer_slots"].get<int>(); ++i) {
    absl::StatusOr<torch::Tensor> t = ReadTensor(path, absl::StrCat("optimizer_", i));
    if (!t.ok()) return t.status();
    s.optimizer.push_back(*t);
  }
  for (int i = 0; i < meta["buffers"].get<int>(); ++i) {
    absl::StatusOr<torch::Tensor> t = ReadTensor(path, absl::StrCat("buffer_", i));
    if (!t.ok()) return t.status();
    s.buffers.push_back(*t);
  }
  return s;
}

}  // namespace

absl::Status WriteCheckpoint(const std::string& dir, const CheckpointState& state, int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat(dir, ": ", ec.message()));
  std::string path = absl::StrFormat("%s/ckpt-epoch-%06d.zip", dir, state.epochs_done);
  nlohmann::json meta = {{"format", 1},
                         {"epochs_done", state.epochs_done},
                         {"iterations", state.iterations},
                         {"history", state.history},
                         {"optimizer_slots", state.optimizer.size()},
                         {"buffers", state.buffers.size()}};
  absl::StatusOr<std::unique_ptr<zip::ZipWriter>> zip = zip::ZipWriter::Create(path);
  if (!zip.ok()) return zip.status();
  auto add = [&](const std::string& name, const std::string& data) {
    return (*zip)->Add(name, data, zip::Method::kStored);
  };
  if (absl::Status s = add("meta.json", meta.dump()); !s.ok()) return s;
  if (absl::Status s = add("params.npy", NpyBytes(state.params)); !s.ok()) return s;
  for (size_t i = 0; i < state.optimizer.size(); ++i) {
    if (absl::Status s = add(absl::StrCat("optimizer_", i, ".npy"), NpyBytes(state.optimizer[i]));
        !s.ok()) {
      return s;
    }
  }
  for (size_t i = 0; i < state.buffers.size(); ++i) {
    if (absl::Status s = add(absl::StrCat("buffer_", i, ".npy"), NpyBytes(state.buffers[i]));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = (*zip)->Finish(); !s.ok()) return s;
  std::vector<fs::path> files = CheckpointFiles(dir);
  for (size_t i = 0; i + keep < files.size(); ++i) fs::remove(files[i], ec);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<CheckpointState>> LoadLatestCheckpoint(
    const std::string& dir, const std::function<absl::Status(const CheckpointState&)>& fits,
    const std::function<void(const std::string&)>& warn) {
  std::vector<fs::path> files = CheckpointFiles(dir);
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    absl::StatusOr<CheckpointState> state = Load(it->string());
    absl::Status ok = state.ok() ? fits(*state) : state.status();
    if (ok.ok()) return std::optional<CheckpointState>(std::move(*state));
    warn(absl::StrCat("skipping checkpoint ", it->string(), ": ", ok.message()));
  }
  return std::optional<CheckpointState>();
}

}  // namespace cohort::trainer
