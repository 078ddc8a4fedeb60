// OpenBLAS through its CBLAS interface. Debian ships it built for pthreads, OpenMP or
// serial (the libopenblas.so.0 alternative picks one at run time); the pthread build keeps
// its own pool, which ignores omp_set_num_threads, so the count is set here explicitly.
#include <cblas.h>

#include "gemm_kernels.hpp"

namespace mpiddp::kernels::gemm_detail {
namespace {

CBLAS_TRANSPOSE cblas_op(Op op) { return op == Op::kTranspose ? CblasTrans : CblasNoTrans; }

void openblas_sgemm(Op op_a, Op op_b, Index m, Index n, Index k, const float* a, Index lda,
                    const float* b, Index ldb, float beta, float* c, Index ldc) {
  cblas_sgemm(CblasColMajor, cblas_op(op_a), cblas_op(op_b), m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

void openblas_dgemm(Op op_a, Op op_b, Index m, Index n, Index k, const double* a, Index lda,
                    const double* b, Index ldb, double beta, double* c, Index ldc) {
  cblas_dgemm(CblasColMajor, cblas_op(op_a), cblas_op(op_b), m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

void openblas_threads(int threads) { openblas_set_num_threads(threads); }

std::string openblas_threading() {
  switch (openblas_get_parallel()) {
    case 0: return "serial";
    case 1: return "pthreads";
    case 2: return "OpenMP";
    default: return "unknown";
  }
}

}  // namespace

const GemmKernels* openblas_kernels() {
  static const GemmKernels kernels{GemmBackend::kOpenBlas, openblas_sgemm, openblas_dgemm, openblas_threads,
                                   reinterpret_cast<const void*>(&cblas_sgemm), openblas_threading};
  return &kernels;
}

}  // namespace mpiddp::kernels::gemm_detail
