#include "worker/trainer/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/fault_point.h"
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

// Reads the member `key`.npy through the zip reader, which checks its CRC-32: a
// checkpoint whose bytes were damaged is refused rather than resumed from.
absl::StatusOr<torch::Tensor> ReadTensor(const zip::ZipReader& zip, const std::string& key) {
  absl::StatusOr<std::string> bytes = zip.Read(absl::StrCat(key, ".npy"));
  if (!bytes.ok()) return bytes.status();
  std::string source = absl::StrCat(zip.name(), "[", key, "]");
  absl::StatusOr<npy::NpyHeader> header = npy::ParseNpyHeader(*bytes, source);
  if (!header.ok()) return header.status();
  if (header->dtype != npy::DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(source, " is not float32"));
  }
  if (header->data_offset + header->data_bytes != bytes->size()) {
    return absl::InvalidArgumentError(absl::StrCat(source, " holds ", bytes->size(),
                                                   " bytes, its header promises ",
                                                   header->data_offset + header->data_bytes));
  }
  torch::Tensor t = torch::empty(header->shape, torch::kFloat32);
  std::memcpy(t.data_ptr(), bytes->data() + header->data_offset, header->data_bytes);
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
  const nlohmann::json meta = nlohmann::json::parse(*meta_text, nullptr, false);
  auto count = [&](const char* key) {
    return meta.is_object() && meta.contains(key) && meta[key].is_number_integer() &&
           meta[key].get<int64_t>() >= 0;
  };
  if (!count("epochs_done") || !count("iterations") || !count("optimizer_slots") ||
      !count("buffers") || !meta.contains("history") || !meta["history"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": meta.json is damaged"));
  }
  CheckpointState s;
  s.epochs_done = meta["epochs_done"].get<int>();
  s.iterations = meta["iterations"].get<int64_t>();
  s.history = meta["history"];
  absl::StatusOr<torch::Tensor> params = ReadTensor(**zip, "params");
  if (!params.ok()) return params.status();
  s.params = *params;
  for (int64_t i = 0; i < meta["optimizer_slots"].get<int64_t>(); ++i) {
    absl::StatusOr<torch::Tensor> t = ReadTensor(**zip, absl::StrCat("optimizer_", i));
    if (!t.ok()) return t.status();
    s.optimizer.push_back(*t);
  }
  for (int64_t i = 0; i < meta["buffers"].get<int64_t>(); ++i) {
    absl::StatusOr<torch::Tensor> t = ReadTensor(**zip, absl::StrCat("buffer_", i));
    if (!t.ok()) return t.status();
    s.buffers.push_back(*t);
  }
  return s;
}

}  // namespace

absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, const CheckpointState& state,
                                            int keep) {
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
  FaultPoint("checkpoint-write");  // tests/faults: half a checkpoint is on disk
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
  // A writer killed mid-write leaves its temporary file ("<name>.tmp-<pid>"); it is
  // never read as a checkpoint, and one process at a time writes a rank's checkpoints,
  // so any still here is such a leftover.
  std::vector<fs::path> leftovers;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (absl::StartsWith(name, "ckpt-epoch-") && absl::StrContains(name, ".zip.tmp-")) {
      leftovers.push_back(e.path());
    }
  }
  for (const fs::path& leftover : leftovers) fs::remove(leftover, ec);
  return path;
}

absl::StatusOr<std::optional<CheckpointState>> LoadLatestCheckpoint(
    const std::string& dir, const std::function<absl::Status(const CheckpointState&)>& fits,
    const std::function<void(const std::string&)>& warn) {
  std::vector<fs::path> files = CheckpointFiles(dir);
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    absl::StatusOr<CheckpointState> state = Load(it->string());
    if (!state.ok()) {
      // Load's errors name the file already.
      warn(absl::StrCat("skipping checkpoint ", state.status().message()));
      continue;
    }
    absl::Status fit = fits(*state);
    if (fit.ok()) return std::optional<CheckpointState>(std::move(*state));
    warn(absl::StrCat("skipping checkpoint ", it->string(), ": ", fit.message()));
  }
  return std::optional<CheckpointState>();
}

}  // namespace cohort::trainer
