#pragma once
// What the data-parallel step and the local step (sync off) share: this rank's b samples go
// through forward and backward in accumulate_steps micro-batches whose gradients add up to
// that of the rank's mean loss, and evaluation gives rank r the samples r, r + N, r + 2N, ...
// Each subclass says how the ranks' results are combined.
#include <vector>

#include "mpiddp/train/step_strategy.hpp"

namespace mpiddp::train {

template <typename T>
class MicroBatchStep : public StepStrategy<T> {
 public:
  // statistics_ranks: how many ranks' samples BatchNorm normalises over (its statistics
  // shared: N; else 1). Throws ConfigError when a micro-batch is too small for a layer.
  MicroBatchStep(const StepParts<T>& parts, Index statistics_ranks);

  // An explicit compute.gemm is every rank's already; `auto` is measured once, on rank 0
  // (Note [the choice is remembered]), and sent.
  GemmChoice start(int threads) override;
  double compute_gradients(const Index* samples, Index count) override;
  double update(double lr) override { return parts_.optimizer.step(model_.parameters(), model_.gradients(), lr); }
  void swap_in_average(T* kept) override { parts_.optimizer.swap_in_average(model_.parameters(), kept); }
  void restore_parameters(const T* kept) override { parts_.optimizer.restore_parameters(model_.parameters(), kept); }
  // Rank r evaluates samples r, r+N, r+2N, ... with no padding, so each sample counts once;
  // the sums are reduced in double, which makes the result independent of N to ~1e-16.
  nn::EvalSums evaluate(const data::Dataset<T>& set) override;

 protected:
  // Before the step's pass: nothing, or what the mode needs (rank 0's buffers).
  virtual void before_pass() {}
  // Before the step's first backward: readies what backward writes into. Here the model's
  // gradient buffer, of which only what backward adds to is cleared (Note [gradients written,
  // not cleared] in src/nn/model.cpp).
  virtual void prepare_gradients() { model_.prepare_gradient_overwrite(); }
  // Whether micro-batch m's backward writes the gradients anew rather than adding to the
  // earlier micro-batches': only the first's, where the step's gradients add up in one buffer.
  virtual bool gradients_start_over(Index micro_batch) const { return micro_batch == 0; }
  // Before the last micro-batch's backward, whose mean loss over the rank's samples is
  // `loss`: the listener that hears backward's "gradients ready", or null.
  virtual nn::GradientListener* before_last_backward(double /*loss*/) { return nullptr; }
  // An evaluation round in which this rank has no batch left (the set does not fill the last
  // round): nothing, or the collectives the other ranks' passes take part in (ZeRO-3's gathers).
  virtual void evaluation_round_without_batch() {}
  Index statistics_ranks() const { return statistics_ranks_; }

  StepParts<T> parts_;
  BatchPipeline<T>& pipeline_;
  nn::Model<T>& model_;

 private:
  // (b) the position of this rank's j-th sample inside the step's global batch: N j + r
  // (data/sampler.hpp), the same sample at every world size.
  std::vector<Index> positions_;
  std::vector<Index> eval_samples_;  // (b) sample indices of one evaluation block
  Index statistics_ranks_;
};

}  // namespace mpiddp::train
