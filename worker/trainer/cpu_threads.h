#pragma once

// The CPU threads a rank computes with.
//
// LibTorch's CPU matrix products go to whatever BLAS is libblas.so.3 (Debian's
// alternatives pick OpenBLAS when libopenblas0 is installed). OpenBLAS keeps a thread
// pool of its own, one thread per core by default, that torch::set_num_threads does not
// reach: two ranks on a 2-core machine would then run four spinning BLAS threads. So
// the rank's thread count is given to both.

namespace cohort::trainer {

// The cores of this machine divided among `local_ranks` ranks (at least 1).
int DefaultCpuThreads(int local_ranks);

// LibTorch's intra-op pool and, when the BLAS is OpenBLAS, its pool get `threads`
// threads. Call before training, from the training thread.
void SetCpuThreads(int threads);

}  // namespace cohort::trainer
