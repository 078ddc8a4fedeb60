// kernels::multiply_tile (kernels/gemm.hpp): Eigen's product on strided views, whatever
// library compute.gemm names. Eigen picks its coefficient-wise product below 20 for
// rows + columns + depth and its blocked one above, by the sizes alone: the same choice, and
// the same bits, as the direct products the attention layer made before this seam.
//
// Under compute.precision bf16_reference, the operands are rounded to bfloat16
// (kernels/precision.hpp) into dense copies and multiplied by the same Eigen product in float32.
// Under bf16, our own kernel on vdpbf16ps computes the tile from the same rounded operands
// (Note [bf16 tiles] in bf16_tile_product.cpp): a tile is too small for a library's call to pay.
// The two agree within float32 accumulation's bound, as the large products do.
#include <type_traits>
#include <vector>

#include "gemm_backends/gemm_kernels.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/kernels/precision.hpp"

namespace mpiddp::kernels {

template <typename T>
void multiply_tile(StridedView<T> c, ConstStridedView<T> a, Op op_a, ConstStridedView<T> b, Op op_b, Accumulate mode) {
  const auto product = [&](const auto& left, const auto& right) {
    if (mode == Accumulate::kAdd) c.noalias() += left * right;
    else c.noalias() = left * right;
  };
  const auto products = [&](const auto& left, const auto& right) {
    if (op_a == Op::kNone && op_b == Op::kNone) product(left, right);
    else if (op_a == Op::kTranspose && op_b == Op::kNone) product(left.transpose(), right);
    else if (op_a == Op::kNone) product(left, right.transpose());
    else product(left.transpose(), right.transpose());
  };
  if constexpr (std::is_same_v<T, float>) {
    const Precision precision = precision_in_use();
    if (precision == Precision::kBf16 && gemm_detail::bf16_tile_product(c, a, op_a, b, op_b, mode)) return;
    if (precision != Precision::kFloat32) {
      thread_local std::vector<float> rounded_a, rounded_b;
      return products(
          gemm_detail::bf16_rounded_copy(a.data(), a.rows(), a.cols(), a.outerStride(), rounded_a),
          gemm_detail::bf16_rounded_copy(b.data(), b.rows(), b.cols(), b.outerStride(), rounded_b));
    }
  }
  products(a, b);
}

template void multiply_tile<float>(StridedView<float>, ConstStridedView<float>, Op, ConstStridedView<float>, Op,
                                   Accumulate);
template void multiply_tile<double>(StridedView<double>, ConstStridedView<double>, Op, ConstStridedView<double>, Op,
                                    Accumulate);

}  // namespace mpiddp::kernels
