#pragma once
// What each matrix-product library provides to kernels/gemm.cpp: its products on raw column-major
// arrays, as BLAS takes them, and its thread control. Internal to src/nn/.
#include <string>

#include "mpiddp/kernels/gemm.hpp"

namespace mpiddp::kernels::gemm_detail {

// c = op(a) op(b) + beta c with leading dimensions; beta is 0 or 1.
template <typename T>
using GemmFunction = void (*)(Op op_a, Op op_b, Index m, Index n, Index k, const T* a, Index lda,
                              const T* b, Index ldb, T beta, T* c, Index ldc);

struct GemmKernels {
  GemmBackend backend;
  GemmFunction<float> sgemm;
  GemmFunction<double> dgemm;  // null: the library has none, Eigen computes double products
  void (*set_threads)(int threads);
  const void* entry_point;     // its float product, to find which file really answers it
  std::string (*threading)();  // "pthreads", "OpenMP", ... as the library reports it
};

// Null when the library was not found at build time.
const GemmKernels* openblas_kernels();
const GemmKernels* blis_kernels();
const GemmKernels* onednn_kernels();

}  // namespace mpiddp::kernels::gemm_detail
