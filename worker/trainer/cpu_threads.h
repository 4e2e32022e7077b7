#pragma once

// The CPU threads a rank computes with.
//
// A rank computes on two thread pools. LibTorch's CPU matrix products go to whatever
// BLAS is libblas.so.3 (Debian's alternatives pick OpenBLAS when libopenblas0 is
// installed), and OpenBLAS keeps a pool of its own that torch::set_num_threads does not
// reach; everything else (elementwise ops, reductions, and the convolutions, which this
// LibTorch runs through oneDNN, at::mkldnn_convolution) runs on LibTorch's intra-op
// pool (OpenMP in this build). Both pools busy-wait between calls, so when both have
// several threads they take the cores from each other: the mlp on 2 threads ran at
// 20-30k samples/s that way, against 57k with the threads in OpenBLAS alone and 51k on
// one thread. So one pool gets the rank's threads and the other one thread: OpenBLAS
// for models of matrix products (Dense), the intra-op pool for models with convolutions
// (the cnn: 8.9k samples/s against 7.0k with both, 4.8k with OpenBLAS alone). Models
// that DenseGraph trains with oneDNN's products (gemm.h) run those on the intra-op
// pool's OpenMP threads, so they give their threads to it too.
// Measured on 2 cores only: on many cores, a large batch's elementwise ops on one
// intra-op thread may come to bound a Dense model's step (not measured).
//
// Denormal floats (magnitudes below ~1.2e-38) take the x86 FPU's slow path. A model
// that fits its data well drives gradients and Adam's moments there: the mlp's step ran
// 1.7x slower after ~1,000 steps on repeated data (PyTorch eager alike). Keras'
// TensorFlow and JAX backends flush denormals to zero, and so do a rank's threads.

//
// OpenBLAS picks its kernels by the CPU's model number when it loads, before main. On
// a CPU newer than it knows (0.3.21, Debian 12's, on an Emerald Rapids: family 6, model
// 207) it falls back to Prescott's SSE3 kernels: LibTorch's 1024x784 @ 784x256 product
// took 13.2 ms on one thread instead of 2.9 ms, and the mlp through autograd trained at
// 27k samples/s instead of 118k. OPENBLAS_CORETYPE names the kernels instead, and it has
// to be in the environment when the library loads: cohort-worker starts itself again
// with it where OpenBlasCoreTypeToSet() says so (worker/main.cc).

#include <optional>
#include <string>

namespace cohort::trainer {

// The cores this process may run on: its CPU affinity (taskset, a container's cpuset),
// which on a shared node is fewer than the machine's.
int CpuCores();

// The cores of this machine divided among `local_ranks` ranks (at least 1).
int DefaultCpuThreads(int local_ranks);

// Gives `threads` threads to the intra-op pool when `intra_op`, else to OpenBLAS (when
// the BLAS is OpenBLAS), and one to the other. Call before training, from the training
// thread.
void SetCpuThreads(int threads, bool intra_op);

// The calling thread flushes denormals to zero, and so do the threads it starts later
// (a new thread inherits its creator's floating-point mode). Call first, before
// anything starts LibTorch's intra-op pool.
void FlushDenormalsToZero();

// The kernels the OpenBLAS loaded in this process runs ("SkylakeX"); empty when the BLAS
// is not OpenBLAS.
std::string OpenBlasCore();

// The OPENBLAS_CORETYPE to start with, when OpenBLAS fell back to kernels without AVX2
// on a CPU that has AVX2 and FMA: "SkylakeX" where the CPU has AVX-512 (F, CD, BW, DQ,
// VL), else "Haswell". Nullopt where OpenBLAS chose kernels of that class itself, where
// OPENBLAS_CORETYPE is set already (the user's choice stands), or without OpenBLAS.
std::optional<std::string> OpenBlasCoreTypeToSet();

}  // namespace cohort::trainer
