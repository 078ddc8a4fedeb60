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

// Where a pass's parameter gradients go when not into the layers' own gradient views, and how
// wide the pass's products may be. A step strategy supplies one (deterministic mode: each
// chunk's gradients onto its integer grid, train/chunked_pass_gradients.hpp); layers call
// it without knowing the mode. Only layers whose supports_chunked_pass(chunk) says they take
// such a pass see one.
class GradientDestination {
 public:
  virtual ~GradientDestination() = default;
  // A linear map's parameter gradients of x: (F, n) and dy: (O, n), n a whole number of the
  // pass's chunks: dW^T = x dy^T (F, O) for the tensor whose gradient view starts at
  // weight_view, and db = dy's row sums (O) for bias_view's. Collective where the destination
  // is (every rank calls in the same order).
  virtual void add_linear(ConstMatrixView<float> x, ConstMatrixView<float> dy, const float* weight_view,
                          const float* bias_view) = 0;
  virtual void add_linear(ConstMatrixView<double> x, ConstMatrixView<double> dy, const double* weight_view,
                          const double* bias_view) = 0;
  // The most columns one forward product, and one input-gradient product, of the pass may
  // take (the same at every N: kernels/gemm_columns.hpp); 0: no limit.
  virtual Index forward_columns() const = 0;
  virtual Index input_gradient_columns() const = 0;
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
  // Where the parameter gradients go; null: into the layers' own gradient views.
  GradientDestination* parameter_gradients = nullptr;
  // Backward writes the parameter gradients instead of adding to them (Note [gradients
  // written, not cleared] in src/nn/model.cpp): the first micro-batch of a step, whose
  // gradient buffer still holds the last step's sums. A layer sees it set only when its
  // can_overwrite_gradients() says it honours it.
  bool overwrite_gradients = false;

  Index position(Index column) const { return positions ? positions[column] : column; }
  // The destination's product widths, 0 (no limit) without one.
  Index forward_columns() const { return parameter_gradients ? parameter_gradients->forward_columns() : 0; }
  Index input_gradient_columns() const {
    return parameter_gradients ? parameter_gradients->input_gradient_columns() : 0;
  }
};

// The context of an evaluation pass.
inline PassContext evaluation_context() {
  PassContext context;
  context.training = false;
  return context;
}

}  // namespace mpiddp::nn
