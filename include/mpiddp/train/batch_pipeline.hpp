#pragma once
// The batch pipeline: the one sequence that every step strategy runs on a batch of this
// rank's, gather -> forward -> loss (forward_loss) -> backward, over the model and its loss,
// the training data and the batch buffers; and evaluation's gather -> forward ->
// per-sample sums (add_evaluation). Training batches are augmented right after the gather
// (data.train.augment), evaluation's never. With `prefetch`, the gather and augmentation of
// the next step's batch run on a worker thread during this step (train/batch_prefetcher.hpp):
// the prefetcher is a part of the pipeline because the two sets of buffers trade places
// between them, and the pipeline stays the one place that decides which set a pass reads.
// Allocates its buffers once, when it is built.
#include <memory>
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/data/augment.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/nn/context.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/record/step_profile.hpp"
#include "mpiddp/train/batch_buffers.hpp"
#include "mpiddp/train/batch_prefetcher.hpp"

namespace mpiddp::train {

template <typename T>
class BatchPipeline {
 public:
  // batch: the most samples one pass gathers (the per-rank batch); target_outputs: the widest
  // regression target of the sets it will gather (0 for class labels). The label and token
  // buffers take the model's shapes: one label per sample or per position. augment: the
  // transforms of every training batch (data.train.augment); not empty, the model must read
  // the training samples as images (C, H, W), else a ConfigError naming data.train.augment.
  // prefetch: start the worker that gathers the batches prefetch() asks for.
  BatchPipeline(nn::Model<T>& model, const nn::Loss<T>& loss, const data::Dataset<T>& train,
          Index batch, Index target_outputs, record::PhaseClock& phases,
          const std::vector<data::AugmentSpec>& augment = {}, bool prefetch = false);

  nn::Model<T>& model() { return model_; }
  const data::Dataset<T>& train_set() const { return train_; }
  record::PhaseClock& phases() { return phases_; }
  // The training passes' context: the seed, the epoch and step (dropout's masks depend on
  // them, the loop sets them before each step) and BatchNorm's statistics reducer.
  nn::PassContext& training_pass() { return training_pass_; }

  // Asks the worker for the next step's training samples, samples[0, count) of epoch `epoch`
  // (0-based, drawn with training_pass()'s seed), to gather while this step computes; the
  // indices are copied. Does nothing without prefetch. A forward_loss whose samples it holds
  // takes them from it (Note [the prefetched batch] in src/train/batch_prefetcher.cpp).
  void prefetch(const Index* samples, Index count, int64_t epoch);
  // The batches forward_loss took from the worker (0 without prefetch).
  int64_t prefetched_batches() const { return prefetcher_ ? prefetcher_->taken() : 0; }

  // Gathers `count` training samples (samples: their indices in the training set), augments
  // them as pass.seed and pass.epoch draw it, runs the model forward in `pass` and the loss over
  // groups of `group` consecutive columns, each group's loss the mean over its own samples,
  // leaving dLoss/dout in the model's output gradient. Writes the groups' losses to
  // group_losses, count / group of them, and returns the first (the batch's, when group is
  // count). backward() follows with the same pass.
  double forward_loss(const Index* samples, Index count, const nn::PassContext& pass, Index group,
                      double* group_losses);
  double forward_loss(const Index* samples, Index count, const nn::PassContext& pass) {
    double loss;
    return forward_loss(samples, count, pass, count, &loss);
  }
  // Backward over the batch of the last forward_loss, before the next forward_loss (which may
  // hand the buffers it read to the worker).
  void backward(const nn::PassContext& pass, nn::GradientListener* listener = nullptr);

  // Adds the per-sample losses (and correct predictions) of `count` samples of `set`, in
  // evaluation mode (BatchNorm's running statistics, dropout off), to sums.
  void add_evaluation(const data::Dataset<T>& set, const Index* samples, Index count,
                      nn::EvalSums& sums);

 private:
  // The first column of the batch buffers where the pass's samples lie once gathered (or
  // taken from the worker, with prefetch) and augmented.
  Index training_batch(const Index* samples, Index count, const nn::PassContext& pass);

  nn::Model<T>& model_;
  const nn::Loss<T>& loss_;
  const data::Dataset<T>& train_;
  record::PhaseClock& phases_;
  nn::PassContext training_pass_;
  Index first_ = 0, columns_ = 0;       // the columns of the last forward_loss
  BatchBuffers<T> batch_;               // (capacity batch) what the passes read
  data::Augmentation<T> augmentation_;  // of batch_'s values, training passes only; empty: none
  std::unique_ptr<BatchPrefetcher<T>> prefetcher_;  // with prefetch: the next step's batch
};

}  // namespace mpiddp::train
