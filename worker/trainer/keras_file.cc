#include "worker/trainer/keras_file.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/zip/zip_reader.h"
#include "common/zip/zip_writer.h"

namespace cohort::trainer {
namespace {

absl::Status Prefix(const std::string& path, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
}

}  // namespace

absl::StatusOr<KerasModelFile> LoadKerasModel(const std::string& path,
                                              const keras::ModelLimits& limits) {
  KerasModelFile out;
  if (absl::EndsWith(path, ".keras")) {
    absl::StatusOr<std::unique_ptr<zip::ZipReader>> zip = zip::ZipReader::Open(path);
    if (!zip.ok()) return zip.status();
    absl::StatusOr<std::string> config = (*zip)->Read("config.json");
    if (!config.ok()) return config.status();
    out.config_json = std::move(*config);
    if ((*zip)->Find("metadata.json") != nullptr) {
      absl::StatusOr<std::string> meta = (*zip)->Read("metadata.json");
      if (!meta.ok()) return meta.status();
      nlohmann::json m = nlohmann::json::parse(*meta, nullptr, /*allow_exceptions=*/false);
      if (m.is_object() && m.contains("keras_version") && m["keras_version"].is_string()) {
        out.keras_version = m["keras_version"].get<std::string>();
      }
    }
    if ((*zip)->Find(kKerasWeightsFileName) != nullptr) {
      absl::StatusOr<std::string> h5 = (*zip)->Read(kKerasWeightsFileName);
      if (!h5.ok()) return h5.status();
      absl::StatusOr<KerasWeights> weights =
          ReadKerasWeights(*h5, absl::StrCat(path, "[", kKerasWeightsFileName, "]"));
      if (!weights.ok()) return weights.status();
      out.weights = std::move(*weights);
    }
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read the model file"));
    std::stringstream ss;
    ss << in.rdbuf();
    out.config_json = ss.str();
  }
  absl::StatusOr<keras::ModelIr> ir = keras::ParseModelConfig(out.config_json, limits);
  if (!ir.ok()) return Prefix(path, ir.status());
  out.ir = std::move(*ir);
  return out;
}

absl::Status WriteKerasModel(const std::string& path, const std::string& config_json,
                             const KerasWeights& weights, const std::string& keras_version) {
  absl::StatusOr<std::string> h5 = WriteKerasWeights(weights);
  if (!h5.ok()) return h5.status();
  nlohmann::json meta = {
      {"keras_version", keras_version},
      {"date_saved", absl::FormatTime("%Y-%m-%d@%H:%M:%S", absl::Now(), absl::UTCTimeZone())}};
  absl::StatusOr<std::unique_ptr<zip::ZipWriter>> zip = zip::ZipWriter::Create(path);
  if (!zip.ok()) return zip.status();
  for (auto [name, data] : {std::pair<std::string, std::string>{"metadata.json", meta.dump()},
                            {"config.json", config_json},
                            {kKerasWeightsFileName, *h5}}) {
    if (absl::Status s = (*zip)->Add(name, data, zip::Method::kStored); !s.ok()) return s;
  }
  return (*zip)->Finish();
}

}  // namespace cohort::trainer
