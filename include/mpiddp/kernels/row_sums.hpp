#pragma once
// The bias gradient of a layer that adds one bias to every column: the row sums of dy.
#include "mpiddp/core/types.hpp"

namespace mpiddp::kernels {

// sums += the row sums of columns [first, first + count) of m, added column after column: each
// sum in column order whatever the vector width or the addresses. Eigen's m.rowwise().sum()
// splits the rows between vector code and scalar code (which add in other orders) by the
// address of the sums, so the same chunk's bias gradient came out otherwise at another offset.
template <typename T>
void add_row_sums(ConstMatrixView<T> m, Index first, Index count, VectorView<T> sums) {
  for (Index s = first; s < first + count; ++s) sums += m.col(s);
}

}  // namespace mpiddp::kernels
