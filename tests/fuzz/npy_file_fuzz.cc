// libFuzzer entry point for user data files as the coordinator validates them and the
// trainer reads them (common/npy/npy_array.h): the bytes opened as an .npy and as an
// .npz (member "x", or the only member), then every row gathered as float32 and int64
// and checked for NaNs. Any bytes give an array or an error, never a crash, an overread
// or a huge allocation.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "common/npy/npy_array.h"
#include "tests/fuzz/fuzz_file.h"

namespace {

void Exercise(const cohort::npy::NpyArray& a) {
  if (a.shape().empty() || a.rows() < 0 || a.row_elements() < 0) std::abort();
  // At most 64 rows of at most 4096 elements: enough to walk the whole small inputs.
  const int64_t rows = std::min<int64_t>(a.rows(), 64);
  if (a.row_elements() > 4096 || rows == 0) return;
  std::vector<int64_t> indices;
  for (int64_t i = rows - 1; i >= 0; --i) indices.push_back(i);
  std::vector<float> f(indices.size() * a.row_elements());
  (void)a.GatherRows(indices, cohort::npy::DType::kFloat32, f.data());
  std::vector<int64_t> n(indices.size() * a.row_elements());
  (void)a.GatherRows(indices, cohort::npy::DType::kInt64, n.data());
  std::vector<int64_t> outside{a.rows()};
  if (a.GatherRows(outside, cohort::npy::DType::kFloat32, f.data()).ok()) std::abort();
  if (a.rows() <= 64) (void)a.CheckFinite();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& npy = cohort::fuzz::WriteInput(data, size, ".npy");
  if (auto a = cohort::npy::OpenArray(npy, ""); a.ok()) Exercise(**a);
  // The same bytes as an .npz: a different file name, the same contents.
  static const std::string npz = npy.substr(0, npy.size() - 4) + ".npz";
  std::rename(npy.c_str(), npz.c_str());
  if (auto a = cohort::npy::OpenArray(npz, "x"); a.ok()) Exercise(**a);
  if (auto a = cohort::npy::OpenArray(npz, ""); a.ok()) Exercise(**a);
  return 0;
}
