// kernels::multiply_tile (kernels/gemm.hpp): Eigen's product on strided views, whatever
// library compute.gemm names. Eigen picks its coefficient-wise product below 20 for
// rows + columns + depth and its blocked one above, by the sizes alone: the same choice, and
// the same bits, as the direct products the attention layer made before this seam.
#include "mpiddp/kernels/gemm.hpp"

namespace mpiddp::kernels {

template <typename T>
void multiply_tile(StridedView<T> c, ConstStridedView<T> a, Op op_a, ConstStridedView<T> b, Op op_b, Accumulate mode) {
  const auto product = [&](const auto& left, const auto& right) {
    if (mode == Accumulate::kAdd) c.noalias() += left * right;
    else c.noalias() = left * right;
  };
  if (op_a == Op::kNone && op_b == Op::kNone) product(a, b);
  else if (op_a == Op::kTranspose && op_b == Op::kNone) product(a.transpose(), b);
  else if (op_a == Op::kNone) product(a, b.transpose());
  else product(a.transpose(), b.transpose());
}

template void multiply_tile<float>(StridedView<float>, ConstStridedView<float>, Op, ConstStridedView<float>, Op,
                                   Accumulate);
template void multiply_tile<double>(StridedView<double>, ConstStridedView<double>, Op, ConstStridedView<double>, Op,
                                    Accumulate);

}  // namespace mpiddp::kernels
