// libFuzzer entry point for the model.weights.h5 reader
// (worker/trainer/weights/keras_weights.h), the code the trainer loads a user's .keras
// weights with: any bytes give weights or an error, never a crash, a hang or a huge
// allocation. Weights that parse are consistent (every variable holds product(shape)
// values of its dtype), and, when WriteKerasWeights accepts them, read back the same.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "worker/trainer/weights/keras_weights.h"

namespace {

using cohort::trainer::KerasDType;
using cohort::trainer::KerasVarGroup;
using cohort::trainer::KerasVariable;
using cohort::trainer::KerasWeights;

void CheckConsistent(const std::vector<KerasVarGroup>& groups) {
  for (const KerasVarGroup& g : groups) {
    for (const KerasVariable& v : g.variables) {
      size_t want = 1;
      for (int64_t d : v.shape) {
        if (d < 0 || __builtin_mul_overflow(want, static_cast<size_t>(d), &want)) std::abort();
      }
      size_t got = v.dtype == KerasDType::kFloat32 ? v.values.size() : v.int_values.size();
      if (got != want) std::abort();
    }
  }
}

bool SameGroups(const std::vector<KerasVarGroup>& a, const std::vector<KerasVarGroup>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].path != b[i].path || a[i].name != b[i].name ||
        a[i].variables.size() != b[i].variables.size()) {
      return false;
    }
    for (size_t j = 0; j < a[i].variables.size(); ++j) {
      const KerasVariable& x = a[i].variables[j];
      const KerasVariable& y = b[i].variables[j];
      // Bit patterns: NaNs read back as the same NaNs.
      if (x.shape != y.shape || x.int_values != y.int_values || x.values.size() != y.values.size() ||
          (!x.values.empty() &&
           std::memcmp(x.values.data(), y.values.data(), x.values.size() * sizeof(float)) != 0)) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<KerasWeights> weights = cohort::trainer::ReadKerasWeights(bytes, "fuzz.h5");
  if (!weights.ok()) return 0;
  CheckConsistent(weights->groups);
  CheckConsistent(weights->optimizer);
  absl::StatusOr<std::string> written = cohort::trainer::WriteKerasWeights(*weights);
  if (!written.ok()) return 0;  // e.g. a group path Keras would never write
  absl::StatusOr<KerasWeights> again = cohort::trainer::ReadKerasWeights(*written, "again.h5");
  if (!again.ok() || !SameGroups(weights->groups, again->groups) ||
      !SameGroups(weights->optimizer, again->optimizer)) {
    std::abort();
  }
  return 0;
}
