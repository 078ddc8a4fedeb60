#pragma once
// What a layer learns about the pass it is part of: one argument of forward and backward,
// never a global. It is MPI-free; the statistics reducer behind it lives in the distributed
// code (distributed/statistics_reducer.hpp), so layers reduce across ranks without knowing how.
#include <cstddef>
#include <cstdint>

#include "mpiddp/core/types.hpp"

namespace mpiddp::nn {

// Sums per-channel statistics over every rank taking part in a training pass.
class StatisticsReducer {
 public:
  virtual ~StatisticsReducer() = default;
  // values: (count), summed element-wise over the ranks in place; every rank gets the same
  // result. Every rank calls it the same number of times, with the same counts, in order.
  virtual void sum(double* values, size_t count) = 0;
};

// Where a chunked pass puts its parameter gradients when they go straight onto the
// deterministic sum's integer grid (Note [gradients onto the grid] in
// src/train/gradient_grid.cpp) instead of into one term per chunk. A layer asks for the
// maxima its bound needs, the grid of each of its tensors from that bound, and adds every
// chunk's gradients onto it. Collective where it says so: every rank calls in the same order.
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
  // At least `bytes` of memory for a layer's blocks, 64-byte aligned, the same for every
  // layer (one at a time uses it); sized by the first step.
  virtual void* scratch(size_t bytes) = 0;
};

struct PassContext {
  // Training (BatchNorm with batch statistics, dropout on) or evaluation.
  bool training = true;
  // (B) the global positions of the batch's samples inside their step's global batch: the
  // sample at position q of step `step` is the same sample at every world size (see
  // data/sampler.hpp). Null: position j for column j, as in a one-process pass.
  const Index* positions = nullptr;
  uint64_t seed = 0;   // the run seed: random layers (dropout) derive their streams from it
  int64_t epoch = 0;   // 0-based
  int64_t step = 0;    // the global step, counted from 1 over the whole run
  // Reduces BatchNorm's statistics over the ranks, so that they are the global batch's.
  // Null: this pass's own samples only (one process, evaluation, or batchnorm.sync off).
  StatisticsReducer* statistics = nullptr;
  // The deterministic mode's chunked pass (Note [the chunked pass] in
  // src/train/deterministic_step.cpp): the batch is chunks of chunk_columns samples, one
  // after the other, and backward adds each chunk's parameter gradients onto gradient_grid
  // (not into the gradient views). 0: one batch, its gradients added into the views. Only
  // layers that supports_chunked_pass() see it.
  Index chunk_columns = 0;
  GradientGrid* gradient_grid = nullptr;
  // In a chunked pass, the most columns one forward product, and one input-gradient product,
  // may take (multiples of chunk_columns, the same at every N: kernels/gemm_columns.hpp); 0: no limit.
  Index forward_columns = 0;
  Index input_gradient_columns = 0;
  // Backward writes the parameter gradients instead of adding to them (Note [gradients
  // written, not cleared] in src/nn/model.cpp): the first micro-batch of a step, whose
  // gradient buffer still holds the last step's sums. A layer sees it set only when its
  // can_overwrite_gradients() says it honours it.
  bool overwrite_gradients = false;

  Index position(Index column) const { return positions ? positions[column] : column; }
};

// The context of an evaluation pass.
inline PassContext evaluation_context() {
  PassContext context;
  context.training = false;
  return context;
}

}  // namespace mpiddp::nn
