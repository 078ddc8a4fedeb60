#pragma once
// A linear map's parameter gradients in a chunked pass, chunk by chunk onto the integer grid
// (kernels/gradient_grid.hpp): the weight gradient by the grid product where it serves (Note
// [the grid product] in src/kernels/grid_product.cpp), else each chunk's product by the
// library in blocks; the bias gradient column after column.
#include "mpiddp/core/types.hpp"
#include "mpiddp/kernels/gradient_grid.hpp"

namespace mpiddp::kernels {

// x: (F, n) the layer's inputs, dy: (O, n) its output gradients, n a whole number of chunks of
// `chunk` columns, chunk t in columns [t chunk, (t + 1) chunk). Onto the grid: chunk t's
// dW^T = x_t dy_t^T (F, O) as the tensor whose gradient view starts at weight_view, and its
// db = the row sums of dy_t (O) as bias_view's. Collective (the grid's maxima).
template <typename T>
void linear_gradients_on_grid(GradientGrid& grid, ConstMatrixView<T> x, ConstMatrixView<T> dy, Index chunk,
                              const T* weight_view, const T* bias_view);

}  // namespace mpiddp::kernels
