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

}  // namespace cohort::trainer
