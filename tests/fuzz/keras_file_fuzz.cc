// libFuzzer entry point for a user's .keras file as the trainer loads it
// (worker/trainer/keras_file.h LoadKerasModel: the zip reader, config.json,
// metadata.json and model.weights.h5) and as the coordinator reads its config at
// submit (common/zip ZipReader::FromBuffer, then config.json): any bytes give a model
// or an error, never a crash, a hang or a huge allocation, and both readers agree on
// whether the archive has a readable config.json.

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "common/zip/zip_reader.h"
#include "tests/fuzz/fuzz_file.h"
#include "worker/trainer/keras_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = cohort::fuzz::WriteInput(data, size, ".keras");
  absl::StatusOr<cohort::trainer::KerasModelFile> model = cohort::trainer::LoadKerasModel(path);

  absl::StatusOr<std::unique_ptr<cohort::zip::ZipReader>> zip = cohort::zip::ZipReader::FromBuffer(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz.keras");
  absl::StatusOr<std::string> config = zip.ok() ? (*zip)->Read("config.json")
                                                : absl::StatusOr<std::string>(zip.status());
  if (model.ok() && (!config.ok() || *config != model->config_json)) std::abort();
  if (zip.ok()) {
    for (const cohort::zip::ZipEntry& entry : (*zip)->entries()) (void)(*zip)->Read(entry);
  }
  return 0;
}
