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
  // src/train/trainer_deterministic.cpp): the batch is chunks of chunk_columns samples, one
  // after the other, and backward writes (does not add) chunk t's parameter gradients at the
  // layer's gradient views + t * chunk_gradient_stride values, chunk t's own term, which
  // nobody clears first. 0: one batch, its gradients added into the views. Only layers that
  // supports_chunked_pass() see it.
  Index chunk_columns = 0;
  Index chunk_gradient_stride = 0;

  Index position(Index column) const { return positions ? positions[column] : column; }
};

// The context of an evaluation pass.
inline PassContext evaluation_context() {
  PassContext context;
  context.training = false;
  return context;
}

}  // namespace mpiddp::nn
