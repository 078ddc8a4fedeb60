// oneDNN's dnnl_sgemm. It is row-major, so the column-major c = op(a) op(b) is computed as
// the row-major c^T = op(b)^T op(a)^T: the same memory, with the operands swapped. It has no
// double product; kernels/gemm.cpp sends those to Eigen. Its threads are OpenMP's.
#include <oneapi/dnnl/dnnl.h>

#include "gemm_kernels.hpp"

namespace mpiddp::kernels::gemm_detail {
namespace {

char dnnl_op(Op op) { return op == Op::kTranspose ? 'T' : 'N'; }

void onednn_sgemm(Op op_a, Op op_b, Index m, Index n, Index k, const float* a, Index lda,
                  const float* b, Index ldb, float beta, float* c, Index ldc) {
  dnnl_sgemm(dnnl_op(op_b), dnnl_op(op_a), n, m, k, 1.0f, b, ldb, a, lda, beta, c, ldc);
}

void onednn_threads(int) {}  // OpenMP's count, which core/threads.cpp sets

std::string onednn_threading() {
  const dnnl_version_t* v = dnnl_version();
  return std::string(v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other") + ", oneDNN " +
         std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

}  // namespace

const GemmKernels* onednn_kernels() {
  static const GemmKernels kernels{GemmBackend::kOneDnn, onednn_sgemm, nullptr, onednn_threads,
                                   reinterpret_cast<const void*>(&dnnl_sgemm), onednn_threading};
  return &kernels;
}

}  // namespace mpiddp::kernels::gemm_detail
