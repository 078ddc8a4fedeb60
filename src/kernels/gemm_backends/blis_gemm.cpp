// BLIS through its own typed API (bli_?gemm), not its CBLAS layer: OpenBLAS exports the same
// cblas_* names, and with both linked one would silently answer for the other.
#include <blis.h>

#include "gemm_kernels.hpp"

namespace mpiddp::kernels::gemm_detail {
namespace {

trans_t blis_op(Op op) { return op == Op::kTranspose ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE; }

// Column-major: row stride 1, column stride the leading dimension.
template <typename T, typename F>
void blis_gemm(F function, Op op_a, Op op_b, Index m, Index n, Index k, const T* a, Index lda,
               const T* b, Index ldb, T beta, T* c, Index ldc) {
  T one = 1;
  function(blis_op(op_a), blis_op(op_b), m, n, k, &one, const_cast<T*>(a), 1, lda,
           const_cast<T*>(b), 1, ldb, &beta, c, 1, ldc);
}

void blis_sgemm(Op op_a, Op op_b, Index m, Index n, Index k, const float* a, Index lda,
                const float* b, Index ldb, float beta, float* c, Index ldc) {
  blis_gemm(bli_sgemm, op_a, op_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

void blis_dgemm(Op op_a, Op op_b, Index m, Index n, Index k, const double* a, Index lda,
                const double* b, Index ldb, double beta, double* c, Index ldc) {
  blis_gemm(bli_dgemm, op_a, op_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

void blis_threads(int threads) { bli_thread_set_num_threads(threads); }

std::string blis_threading() { return bli_info_get_enable_openmp() ? "OpenMP" : bli_info_get_enable_pthreads() ? "pthreads" : "serial"; }

}  // namespace

const GemmKernels* blis_kernels() {
  static const GemmKernels kernels{GemmBackend::kBlis, blis_sgemm, blis_dgemm, blis_threads,
                                   reinterpret_cast<const void*>(&bli_sgemm), blis_threading};
  return &kernels;
}

}  // namespace mpiddp::kernels::gemm_detail
