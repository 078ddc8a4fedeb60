// The micro-batched pass and the strided evaluation that the data-parallel and the local
// step share (include/mpiddp/train/micro_batch_step.hpp).
#include "mpiddp/train/micro_batch_step.hpp"

#include <algorithm>

namespace mpiddp::train {

namespace {

// The fewest samples one training forward pass sees: the smaller of a full step's and the
// epoch's last (shorter) step's smallest micro-batch (see compute_gradients' split).
Index smallest_micro_batch(const data::DistributedSampler& sampler, Index batch_per_rank,
                           Index accumulate_steps) {
  const Index steps = sampler.steps_per_epoch(batch_per_rank);
  const Index last = sampler.per_rank() - (steps - 1) * batch_per_rank;
  auto smallest = [&](Index count) { return count / std::min(accumulate_steps, count); };
  return std::min(smallest(batch_per_rank), smallest(last));
}

}  // namespace

template <typename T>
MicroBatchStep<T>::MicroBatchStep(const StepParts<T>& parts, Index statistics_ranks)
    : parts_(parts), pipeline_(parts.pipeline), model_(parts.pipeline.model()),
      positions_(static_cast<size_t>(parts.batch_per_rank)),
      eval_samples_(static_cast<size_t>(parts.batch_per_rank)), statistics_ranks_(statistics_ranks) {
  const Index world = parts.comm.size(), rank = parts.comm.rank();
  for (Index j = 0; j < parts.batch_per_rank; ++j) positions_[j] = j * world + rank;
  const Index smallest = smallest_micro_batch(parts.sampler, parts.batch_per_rank,
                                              parts.config.accumulate_steps);
  model_.layers().check_training_batch(smallest * statistics_ranks);
}

template <typename T>
GemmChoice MicroBatchStep<T>::start(int threads) {
  const config::Config& config = parts_.config;
  if (config.gemm != "auto") return choose_gemm<T>(config.gemm, {}, threads);
  GemmChoice gemm;
  if (parts_.comm.rank() == 0)
    gemm = choose_gemm<T>(config.gemm, model_.gemm_calls(parts_.batch_per_rank), threads);
  int32_t backend = static_cast<int32_t>(gemm.backend);
  parts_.comm.broadcast(&backend, sizeof backend, 0);
  gemm.backend = static_cast<kernels::GemmBackend>(backend);
  return gemm;
}

template <typename T>
double MicroBatchStep<T>::compute_gradients(const Index* samples, Index count) {
  before_pass();
  // The first micro-batch's backward writes the gradients (Note [gradients written, not
  // cleared] in src/nn/model.cpp): only what it adds to is cleared. That counts as
  // forward work in the profile; the trace shows it apart.
  prepare_gradients();
  pipeline_.phases().lap(&record::StepProfile::forward_s, record::SpanKind::kZeroGradients);
  // Micro-batch m has count/K samples (the first count % K one more). Each one's loss is
  // its own mean; weighting its output gradient by size/count makes the K gradients add up
  // to the gradient of the mean over all count samples, as one batch would give.
  const Index micro_batches = std::min<Index>(parts_.config.accumulate_steps, count);
  const Index base = count / micro_batches, extra = count % micro_batches;
  double loss = 0.0;
  Index first = 0;
  for (Index m = 0; m < micro_batches; ++m) {
    const Index size = base + (m < extra ? 1 : 0);
    // The micro-batches of all ranks with the same m form the one-process run's m-th
    // micro-batch, so BatchNorm's statistics and dropout's positions are that batch's.
    nn::PassContext pass = pipeline_.training_pass();
    pass.positions = positions_.data() + first;
    pass.overwrite_gradients = gradients_start_over(m);
    const double micro_loss = pipeline_.forward_loss(samples + first, size, pass);
    if (micro_batches == 1) {
      loss = micro_loss;
    } else {
      const double weight = static_cast<double>(size) / static_cast<double>(count);
      model_.output_gradient() *= static_cast<T>(weight);
      loss += micro_loss * weight;
    }
    const bool last = m + 1 == micro_batches;
    pipeline_.backward(pass, last ? before_last_backward(loss) : nullptr);
    first += size;
  }
  return loss;
}

template <typename T>
nn::EvalSums MicroBatchStep<T>::evaluate(const data::Dataset<T>& set) {
  nn::EvalSums sums;
  const Index n = set.samples, world = parts_.comm.size(), b = parts_.batch_per_rank;
  // Every rank walks as many rounds as the rank with the most batches.
  const Index rounds = (n + world * b - 1) / (world * b);
  for (Index round = 0; round < rounds; ++round) {
    const Index first = parts_.comm.rank() + round * world * b;
    Index count = 0;
    for (Index i = first; i < n && count < b; i += world) eval_samples_[count++] = i;
    if (count > 0) pipeline_.add_evaluation(set, eval_samples_.data(), count, sums);
    else evaluation_round_without_batch();
  }
  double totals[2] = {sums.loss_sum, sums.correct};
  parts_.comm.allreduce_sum(totals, 2);
  return {totals[0] / static_cast<double>(n), totals[1] / static_cast<double>(n)};
}

template class MicroBatchStep<float>;
template class MicroBatchStep<double>;

}  // namespace mpiddp::train
