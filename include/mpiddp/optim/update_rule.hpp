#pragma once
// Update rules (sgd, adam, adamw) update a flat run of parameters from the same run of
// gradients, with PyTorch's exact rules (torch.optim, single-tensor path, no amsgrad). The
// optimizer (optim/optimizer.hpp) runs one over this rank's part of the parameters.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpiddp/core/types.hpp"

namespace mpiddp::optim {

// Which tensors weight decay reaches: every one (PyTorch's one parameter group), or those of
// two or more dimensions (nanoGPT's rule: matrices and embeddings, not biases or norms).
enum class DecayRule { kAll, kMatrices };

struct OptimizerConfig {
  std::string type = "sgd";  // sgd | adam | adamw
  double lr = 0.03;
  double momentum = 0.0;     // sgd
  double dampening = 0.0;    // sgd
  bool nesterov = false;     // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  DecayRule decay = DecayRule::kAll;
  // PyTorch's clip_grad_norm_ on the averaged gradient before each update; 0: off
  // (optim/gradient_clip.hpp).
  double clip_grad_norm = 0.0;
  // ema.*: an exponential moving average of the parameters, kept as the optimizer state
  // "ema" (see UpdateRule), updated after every ema_every_steps-th step; 0: off.
  double ema_decay = 0.0;
  int64_t ema_every_steps = 1;
};

// Parameter ranges [begin, end), ascending and disjoint.
using ParameterRanges = std::vector<std::pair<Index, Index>>;

template <typename T>
class UpdateRule {
 public:
  virtual ~UpdateRule() = default;
  // params, grads: (P). lr is the scheduled learning rate of this step. The runs of
  // parameters with and without weight decay are updated in order, each elementwise, every
  // gradient read as grads[i] * gradient_scale: clipping's coefficient (optim/gradient_clip.hpp),
  // applied in the update's own pass over the gradient rather than in a pass of its own.
  void step(T* params, const T* grads, double lr, T gradient_scale = T(1));
  // These parameters take no weight decay (optimizer.decay "matrices"); every one does
  // until this is called.
  void exempt_from_decay(const ParameterRanges& ranges);
  // Steps taken so far.
  int64_t steps() const { return steps_; }

  // The optimizer's state as named flat buffers (momentum, exp_avg, ...), for checkpoints,
  // and last, with ema.decay, the average of the parameters ("ema").
  struct StateBuffer {
    std::string name;
    std::vector<T>* values;
  };
  std::vector<StateBuffer> state_buffers();
  void set_steps(int64_t steps) { steps_ = steps; }

  // ema.decay: keep the exponential moving average of the parameters (timm's ModelEmaV2,
  // ema-pytorch): a copy of the parameters as they are before the first step, then after
  // every `every_steps`-th step ema = decay * ema + (1 - decay) * p, in double, rounded once
  // to T. A pure function of the parameters' values, so every rank's (or every part's) is
  // the same bits.
  void keep_average(double decay, int64_t every_steps);
  // The average (P), or null without ema.decay.
  const std::vector<T>* average() const { return average_.empty() ? nullptr : &average_; }

 protected:
  explicit UpdateRule(Index parameters) : runs_{{0, parameters, true}} {}
  // The optimizer's own state (momentum, exp_avg, ...).
  virtual std::vector<StateBuffer> own_state_buffers() = 0;
  // One run's update, parameters [begin, end), after the step count has grown to this
  // step's; weight_decay is the config's, or 0 in a run exempt from it.
  // Each gradient read as grads[i] * gradient_scale.
  virtual void update(T* params, const T* grads, Index begin, Index end, double weight_decay, double lr,
                      T gradient_scale) = 0;

  int64_t steps_ = 0;

 private:
  struct Run {
    Index begin, end;
    bool decayed;
  };
  std::vector<Run> runs_;  // covering [0, P) in order
  double weight_decay_ = 0.0;
  std::vector<T> average_;  // (P) ema.decay's average; empty: off
  double average_decay_ = 0.0;
  int64_t average_every_ = 1;

 protected:
  // The config's weight decay, which the runs that take it get (set by each optimizer).
  void set_weight_decay(double weight_decay) { weight_decay_ = weight_decay; }
};

// Validates the config and builds the optimizer for P parameters; state is allocated here.
template <typename T>
std::unique_ptr<UpdateRule<T>> make_update_rule(const OptimizerConfig& config, Index parameters);

// The state values make_update_rule's rule keeps per parameter, without building it: sgd's
// momentum buffer (with momentum), adam's two moments, and with ema its average and the live
// parameters kept while the average is evaluated (train/memory_plan.hpp).
int state_values_per_parameter(const OptimizerConfig& config);

}  // namespace mpiddp::optim
