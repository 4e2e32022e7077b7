#pragma once

// Sgemm: a row-major float32 matrix product, through the fastest library the process
// has loaded. Torch-free; bench/kernel_floor uses it too, so the floor is measured with
// the products the trainer runs.
//
// LibTorch's CPU matrix products go to libblas.so.3 (OpenBLAS here). Debian's LibTorch
// also links oneDNN, whose dnnl_sgemm (JIT-compiled for the CPU it runs on) is faster on
// the Dense shapes of bench/'s models, one thread, this machine: forward 128x784 @
// 784x256 in 327 us against OpenBLAS' 442 (1024 rows: 2,624 against 3,038), the
// kernel's gradient 382 against 402. So the library is looked up at run time: oneDNN's
// dnnl_sgemm when it is there, else the BLAS' cblas_sgemm, else none (and DenseGraph
// leaves the model to autograd).
//
// Threads: oneDNN runs on the OpenMP threads of the calling thread (LibTorch's intra-op
// pool in this build: torch::set_num_threads), a BLAS on its own pool.

#include <cstdint>

namespace cohort::trainer {

enum class GemmLibrary { kNone, kOneDnn, kBlas };

// The library Sgemm calls; looked up once.
GemmLibrary SgemmLibrary();
const char* GemmLibraryName(GemmLibrary library);

// C (m x n) = op(A) op(B) + beta * C, all row-major with leading dimensions lda, ldb,
// ldc; op(X) is X, or its transpose when `transpose_x`. Requires a library.
void Sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same product with bfloat16 A and B (the upper halves of float32s, as
// cpu_kernels' ToBfloat16 rounds them) summed into float32 C: oneDNN's
// dnnl_gemm_bf16bf16f32, on AMX or AVX-512 BF16 where the CPU has them (this machine's
// 128x784 @ 784x256: 69 us against dnnl_sgemm's 320). False when oneDNN is not loaded
// or cannot run it on this CPU (it needs AVX-512), probed once.
bool HasBf16Gemm();
// Requires HasBf16Gemm().
void Bf16Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
              const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta,
              float* c, int64_t ldc);

}  // namespace cohort::trainer
