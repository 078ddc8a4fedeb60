#pragma once
// This rank's model replica as every step strategy works on it: the model and its loss, the
// training data, the batch buffers, and the one sequence that every strategy runs on a batch,
// gather -> forward -> loss (forward_loss) -> backward, and evaluation's gather -> forward ->
// per-sample sums (add_evaluation). Training batches are augmented right after the gather
// (data.train.augment), evaluation's never. Allocates its buffers once, when it is built.
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/data/augment.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/nn/context.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/record/step_profile.hpp"

namespace mpiddp::train {

template <typename T>
class Replica {
 public:
  // batch: the most samples one pass gathers (the per-rank batch); target_outputs: the widest
  // regression target of the sets it will gather (0 for class labels). The label and token
  // buffers take the model's shapes: one label per sample or per position. augment: the
  // transforms of every training batch (data.train.augment); not empty, the model must read
  // the training samples as images (C, H, W), else a ConfigError naming data.train.augment.
  Replica(nn::Model<T>& model, const nn::Loss<T>& loss, const data::Dataset<T>& train,
          Index batch, Index target_outputs, record::PhaseClock& phases,
          const std::vector<data::AugmentSpec>& augment = {});

  nn::Model<T>& model() { return model_; }
  const data::Dataset<T>& train_set() const { return train_; }
  record::PhaseClock& phases() { return phases_; }
  // The training passes' context: the seed, the epoch and step (dropout's masks depend on
  // them, the loop sets them before each step) and BatchNorm's statistics reducer.
  nn::PassContext& training_pass() { return training_pass_; }

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
  // Backward over the batch of the last forward_loss.
  void backward(const nn::PassContext& pass, nn::GradientListener* listener = nullptr);

  // Adds the per-sample losses (and correct predictions) of `count` samples of `set`, in
  // evaluation mode (BatchNorm's running statistics, dropout off), to sums.
  void add_evaluation(const data::Dataset<T>& set, const Index* samples, Index count,
                      nn::EvalSums& sums);

 private:
  void gather(const data::Dataset<T>& set, const Index* samples, Index count);
  nn::BatchTargets<T> targets(Index first) const;
  nn::BatchInput<T> input(Index count) const;

  nn::Model<T>& model_;
  const nn::Loss<T>& loss_;
  const data::Dataset<T>& train_;
  record::PhaseClock& phases_;
  nn::PassContext training_pass_;
  Index x_rows_ = 0, y_rows_ = 0;  // the gathered set's features and regression outputs
  Index label_rows_ = 1;           // the gathered set's labels per sample
  InputKind input_kind_;           // what the model takes: x_ or token_ids_
  Index columns_ = 0;              // the samples of the last forward_loss
  nn::AlignedVector<T> x_;         // (features, batch), values
  std::vector<int32_t> token_ids_; // (positions, batch), token ids
  nn::AlignedVector<T> y_;         // (outputs, batch), regression
  std::vector<int32_t> labels_;    // (label positions, batch), classification
  data::Augmentation<T> augmentation_;  // of x_, training passes only; empty: none
};

}  // namespace mpiddp::train
