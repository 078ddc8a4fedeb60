#pragma once
// The integer grid that a chunked pass adds its parameter gradients onto, chunk by chunk, when
// their sum must be the same bits at every world size (Note [gradients onto the grid] in
// src/train/gradient_grid.cpp, which implements it over the ranks). A kernel asks for the
// maxima its bound needs, the grid of each tensor from that bound, and adds every chunk's
// gradients onto it. Collective where it says so: every rank calls in the same order.
#include <cstddef>
#include <cstdint>

namespace mpiddp::kernels {

class GradientGrid {
 public:
  struct Tensor {
    int64_t* sums = nullptr;  // the rank's int64 sums of the tensor's gradients
    int shift = 0;            // its grid: value v becomes llrint(v 2^shift)
    bool finite = true;       // false when some rank's bound was not: the tensor comes out NaN
  };
  virtual ~GradientGrid() = default;
  // values: (count) this rank's, replaced by their maxima over every rank. Collective.
  virtual void max_over_ranks(double* values, size_t count) = 0;
  // The grid of the tensor whose gradient view starts at `view`, for values at most `bound`
  // in magnitude in every chunk on every rank (a bound from max_over_ranks' maxima, so the
  // same on every rank and at every N).
  virtual Tensor tensor(const void* view, double bound) = 0;
  // tensor.sums[at + i] += values[i] on the tensor's grid, for i < count. first: the rank's
  // first chunk's values, which set the sums instead (nothing clears them before a pass).
  virtual void add(const float* values, size_t count, const Tensor& tensor, size_t at, bool first) = 0;
  virtual void add(const double* values, size_t count, const Tensor& tensor, size_t at, bool first) = 0;
  // At least `bytes` of memory for a kernel's blocks, 64-byte aligned, the same for every
  // call (one at a time uses it); sized by the first step.
  virtual void* scratch(size_t bytes) = 0;
};

}  // namespace mpiddp::kernels
