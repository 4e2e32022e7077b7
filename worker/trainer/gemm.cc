#include "worker/trainer/gemm.h"

#include <dlfcn.h>

#include <cstdlib>

namespace cohort::trainer {
namespace {

// oneDNN's C API (dnnl.h): row-major, transposes as 'N'/'T'; returns dnnl_success (0).
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
using DnnlBf16Gemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const uint16_t*,
                            int64_t, const uint16_t*, int64_t, float, float*, int64_t);
// CBLAS (cblas.h): int dimensions; CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112.
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);

struct Library {
  GemmLibrary kind = GemmLibrary::kNone;
  DnnlSgemm dnnl = nullptr;
  CblasSgemm cblas = nullptr;
  DnnlBf16Gemm bf16 = nullptr;  // only when it ran a probe product
};

const Library& Found() {
  static const Library library = [] {
    Library l;
    if ((l.dnnl = reinterpret_cast<DnnlSgemm>(dlsym(RTLD_DEFAULT, "dnnl_sgemm")))) {
      l.kind = GemmLibrary::kOneDnn;
    } else if ((l.cblas = reinterpret_cast<CblasSgemm>(dlsym(RTLD_DEFAULT, "cblas_sgemm")))) {
      l.kind = GemmLibrary::kBlas;
    }
    if (auto bf16 = reinterpret_cast<DnnlBf16Gemm>(dlsym(RTLD_DEFAULT, "dnnl_gemm_bf16bf16f32"))) {
      // oneDNN answers dnnl_unimplemented on a CPU without AVX-512: 1 x 1 = 1?
      const uint16_t one = 0x3f80;
      float c = 0;
      if (bf16('N', 'N', 1, 1, 1, 1.0f, &one, 1, &one, 1, 0.0f, &c, 1) == 0 && c == 1.0f) {
        l.bf16 = bf16;
      }
    }
    return l;
  }();
  return library;
}

}  // namespace

GemmLibrary SgemmLibrary() { return Found().kind; }

const char* GemmLibraryName(GemmLibrary library) {
  switch (library) {
    case GemmLibrary::kOneDnn: return "onednn";
    case GemmLibrary::kBlas: return "blas";
    case GemmLibrary::kNone: break;
  }
  return "none";
}

void Sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const Library& l = Found();
  if (l.dnnl != nullptr) {
    // Fails only on bad arguments, which the callers' shapes rule out.
    if (l.dnnl(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb,
               beta, c, ldc) != 0) {
      std::abort();
    }
    return;
  }
  if (l.cblas == nullptr) std::abort();
  l.cblas(101, transpose_a ? 112 : 111, transpose_b ? 112 : 111, static_cast<int>(m),
          static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b,
          static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

bool HasBf16Gemm() { return Found().bf16 != nullptr; }

void Bf16Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
              const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta,
              float* c, int64_t ldc) {
  const Library& l = Found();
  if (l.bf16 == nullptr || l.bf16(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k,
                                  1.0f, a, lda, b, ldb, beta, c, ldc) != 0) {
    std::abort();
  }
}

}  // namespace cohort::trainer
