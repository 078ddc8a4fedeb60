#pragma once
// What each matrix-product library provides to kernels/gemm.cpp: its products on raw column-major
// arrays, as BLAS takes them, and its thread control. Internal to src/kernels/.
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/kernels/gemm.hpp"

namespace mpiddp::kernels::gemm_detail {

// c = op(a) op(b) + beta c with leading dimensions; beta is 0 or 1.
template <typename T>
using GemmFunction = void (*)(Op op_a, Op op_b, Index m, Index n, Index k, const T* a, Index lda,
                              const T* b, Index ldb, T beta, T* c, Index ldc);

// c = op(a) op(b) + beta c with a and b bfloat16 (their 16 bits, core/bf16.hpp) and c float32,
// the products accumulated in float32; beta is 0 or 1.
using Bf16GemmFunction = void (*)(Op op_a, Op op_b, Index m, Index n, Index k, const uint16_t* a, Index lda,
                                  const uint16_t* b, Index ldb, float beta, float* c, Index ldc);

struct GemmKernels {
  GemmBackend backend;
  GemmFunction<float> sgemm;
  GemmFunction<double> dgemm;  // null: the library has none, Eigen computes double products
  void (*set_threads)(int threads);
  const void* entry_point;     // its float product, to find which file really answers it
  std::string (*threading)();  // "pthreads", "OpenMP", ... as the library reports it
  Bf16GemmFunction bf16gemm = nullptr;  // null: the library has no bf16 product of ours
};

// Null when the library was not found at build time.
const GemmKernels* openblas_kernels();
const GemmKernels* blis_kernels();
const GemmKernels* onednn_kernels();

// The library whose bf16 product compute.precision "bf16" uses (oneDNN's), null when none is built in.
const GemmKernels* bf16_kernels();

// kernels::multiply's float32 product by compute.gemm's library, whatever compute.precision says:
// the bf16 reference rounds the operands and hands them here (kernels/bf16_product.cpp).
void multiply_float32(MatrixView<float> c, ConstMatrixView<float> a, Op op_a, ConstMatrixView<float> b, Op op_b,
                      Accumulate mode);
// Sets the threads of one product of `multiply_adds` (Note [threads per product] in kernels/gemm.cpp).
void use_product_threads(double multiply_adds, const GemmKernels* kernels);
// A dense copy of the (rows, cols) view at `in`, its columns `stride` apart, each value rounded
// to bfloat16 (round_columns_to_bf16), in `buffer`, which grows when it is too small and is
// reused: the operands of bf16_reference's products and of attention's tiles in bf16.
ConstMatrixView<float> bf16_rounded_copy(const float* in, Index rows, Index cols, Index stride,
                                         std::vector<float>& buffer);
// An attention tile's product under compute.precision "bf16" by our kernel on vdpbf16ps (Note
// [bf16 tiles] in kernels/bf16_tile_product.cpp); false, having done nothing, where the level in
// use has none (below avx512_bf16), for the caller to compute the reference's tile instead.
bool bf16_tile_product(StridedView<float> c, ConstStridedView<float> a, Op op_a, ConstStridedView<float> b, Op op_b,
                       Accumulate mode);
// kernels::multiply's float product when compute.precision is bf16 or bf16_reference.
void multiply_in_precision(MatrixView<float> c, const Operand<float>& a, Op op_a, const Operand<float>& b, Op op_b,
                           Accumulate mode);

}  // namespace mpiddp::kernels::gemm_detail
