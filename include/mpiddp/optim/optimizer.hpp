#pragma once
// Optimizers update the flat parameter buffer from the flat gradient buffer, with
// PyTorch's exact update rules (torch.optim, single-tensor path, no amsgrad).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/core/types.hpp"

namespace mpiddp::optim {

struct OptimizerConfig {
  std::string type = "sgd";  // sgd | adam | adamw
  double lr = 0.03;
  double momentum = 0.0;     // sgd
  double dampening = 0.0;    // sgd
  bool nesterov = false;     // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
};

template <typename T>
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // params, grads: (P). lr is the scheduled learning rate of this step.
  virtual void step(T* params, const T* grads, double lr) = 0;
  // Steps taken so far.
  int64_t steps() const { return steps_; }

  // The optimizer's state as named flat buffers (momentum, exp_avg, ...), for checkpoints.
  struct StateBuffer {
    std::string name;
    std::vector<T>* values;
  };
  virtual std::vector<StateBuffer> state_buffers() = 0;
  void set_steps(int64_t steps) { steps_ = steps; }

 protected:
  int64_t steps_ = 0;
};

// Validates the config and builds the optimizer for P parameters; state is allocated here.
template <typename T>
std::unique_ptr<Optimizer<T>> make_optimizer(const OptimizerConfig& config, Index parameters);

}  // namespace mpiddp::optim
