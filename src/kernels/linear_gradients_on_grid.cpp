// A linear map's chunked-pass parameter gradients onto the integer grid
// (include/mpiddp/kernels/linear_gradients_on_grid.hpp).
#include "mpiddp/kernels/linear_gradients_on_grid.hpp"

#include <algorithm>
#include <type_traits>

#include "mpiddp/core/finite.hpp"
#include "mpiddp/core/scratch.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/kernels/grid_product.hpp"
#include "mpiddp/kernels/row_sums.hpp"

namespace mpiddp::kernels {

namespace {

// An eighth of a core's L2 for a block of the weight gradient (F rows, a multiple of 4
// columns): the block and its int64 sums stay in cache while every chunk is added to them.
constexpr size_t kGridBlockBytes = 128 * 1024;

// The weight gradient by the grid product (every chunk in one kernel of ours); false for a T
// it has none for (double), or where it does not serve.
template <typename T>
bool weight_gradient_by_grid_product(GradientGrid& grid, ConstMatrixView<T> x, ConstMatrixView<T> dy, Index chunk,
                                     const GradientGrid::Tensor& weights) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;  // the kernel is float's
  } else {
    if (!grid_product_serves<T>()) return false;
    const Index f = x.rows(), o = dy.rows();
    if (weights.finite)
      grid_product(x.data(), f, dy.data(), o, chunk, x.cols() / chunk, weights.shift, weights.sums, false,
                   static_cast<float*>(grid.scratch(grid_product_scratch_bytes(f, o, x.cols()))));
    else
      std::fill_n(weights.sums, f * o, int64_t{0});  // as GradientGrid::add does for a non-finite tensor
    return true;
  }
}

// Chunk by chunk: each chunk's product by the library, in blocks, then onto the grid.
template <typename T>
void weight_gradient_by_library(GradientGrid& grid, ConstMatrixView<T> x, ConstMatrixView<T> dy, Index chunk,
                                const GradientGrid::Tensor& weights) {
  const Index f = x.rows(), o = dy.rows(), chunks = x.cols() / chunk;
  // Blocks of `width` outputs: dW^T[:, block] = x_t dy_t[block, :]^T for each chunk t, each
  // product of the same shape at every N, then onto the grid while the block is in cache.
  const Index fitting = static_cast<Index>(kGridBlockBytes / (static_cast<size_t>(f) * sizeof(T))) / 4 * 4;
  const Index width = std::min(o, std::max<Index>(4, fitting));
  T* block = static_cast<T*>(grid.scratch(scratch_values_bytes<T>(f * width) + scratch_values_bytes<T>(width * chunk)));
  T* dy_block = block + scratch_values_bytes<T>(f * width) / sizeof(T);
  for (Index first = 0; first < o; first += width) {
    const Index n = std::min(width, o - first);
    for (Index t = 0; t < chunks; ++t) {
      MatrixView<T> rows(dy_block, n, chunk);  // dy_t[block, :], contiguous for the product
      rows = dy.block(first, t * chunk, n, chunk);
      multiply(MatrixView<T>(block, f, n), ConstMatrixView<T>(x.data() + t * chunk * f, f, chunk), Op::kNone,
               ConstMatrixView<T>(dy_block, n, chunk), Op::kTranspose, Accumulate::kOverwrite);
      grid.add(block, static_cast<size_t>(f * n), weights, static_cast<size_t>(first * f), t == 0);
    }
  }
}

}  // namespace

template <typename T>
void linear_gradients_on_grid(GradientGrid& grid, ConstMatrixView<T> x, ConstMatrixView<T> dy, Index chunk,
                              const T* weight_view, const T* bias_view) {
  const Index o = dy.rows();
  const Index chunks = x.cols() / chunk;
  // A chunk's gradient of weight (o, f) sums `chunk` products x[f, s] dy[o, s], each at most
  // max|x| max|dy|, and float rounding adds less than chunk * eps of that: twice the sum
  // bounds every chunk's value with room to spare. The maxima are every rank's (collective).
  double maxima[2] = {largest_magnitude(x.data(), static_cast<size_t>(x.size())),
                      largest_magnitude(dy.data(), static_cast<size_t>(dy.size()))};
  grid.max_over_ranks(maxima, 2);
  const double per_chunk = 2.0 * static_cast<double>(chunk);
  const GradientGrid::Tensor weights = grid.tensor(weight_view, per_chunk * maxima[0] * maxima[1]);
  const GradientGrid::Tensor bias = grid.tensor(bias_view, per_chunk * maxima[1]);
  // Every chunk in one kernel of ours for float (Note [the grid product]), else each chunk's
  // product by the library and converted after.
  if (!weight_gradient_by_grid_product(grid, x, dy, chunk, weights))
    weight_gradient_by_library(grid, x, dy, chunk, weights);
  VectorView<T> db(static_cast<T*>(grid.scratch(scratch_values_bytes<T>(o))), o);
  for (Index t = 0; t < chunks; ++t) {
    db.setZero();
    add_row_sums(dy, t * chunk, chunk, db);
    grid.add(db.data(), static_cast<size_t>(o), bias, 0, t == 0);
  }
}

template void linear_gradients_on_grid(GradientGrid&, ConstMatrixView<float>, ConstMatrixView<float>, Index,
                                       const float*, const float*);
template void linear_gradients_on_grid(GradientGrid&, ConstMatrixView<double>, ConstMatrixView<double>, Index,
                                       const double*, const double*);

}  // namespace mpiddp::kernels
