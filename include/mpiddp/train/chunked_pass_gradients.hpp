#pragma once
// Where deterministic mode's chunked pass (Note [the chunked pass] in
// src/train/deterministic_step.cpp) puts its parameter gradients: each chunk's onto the
// integer grid as the layers' backward makes them (Note [gradients onto the grid] in
// src/train/gradient_grid.cpp), by the kernels of kernels/linear_gradients_on_grid.hpp; and the
// widths its products may take, so that every column gets the bits of its own chunk's pass.
#include "mpiddp/core/types.hpp"
#include "mpiddp/kernels/gradient_grid.hpp"
#include "mpiddp/kernels/linear_gradients_on_grid.hpp"
#include "mpiddp/nn/context.hpp"

namespace mpiddp::train {

class ChunkGradientsOnGrid final : public nn::GradientDestination {
 public:
  // chunk_columns: the columns of one chunk; forward_columns, input_gradient_columns: whole
  // chunks, at most what the library was checked at (kernels/gemm_columns.hpp), 0: no limit.
  ChunkGradientsOnGrid(kernels::GradientGrid& grid, Index chunk_columns, Index forward_columns,
                       Index input_gradient_columns)
      : grid_(grid),
        chunk_columns_(chunk_columns),
        forward_columns_(forward_columns),
        input_gradient_columns_(input_gradient_columns) {}

  void add_linear(ConstMatrixView<float> x, ConstMatrixView<float> dy, const float* weight_view,
                  const float* bias_view) override {
    kernels::linear_gradients_on_grid(grid_, x, dy, chunk_columns_, weight_view, bias_view);
  }
  void add_linear(ConstMatrixView<double> x, ConstMatrixView<double> dy, const double* weight_view,
                  const double* bias_view) override {
    kernels::linear_gradients_on_grid(grid_, x, dy, chunk_columns_, weight_view, bias_view);
  }
  Index forward_columns() const override { return forward_columns_; }
  Index input_gradient_columns() const override { return input_gradient_columns_; }

 private:
  kernels::GradientGrid& grid_;
  Index chunk_columns_, forward_columns_, input_gradient_columns_;
};

}  // namespace mpiddp::train
