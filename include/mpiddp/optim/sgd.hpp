#pragma once
#include "mpiddp/optim/optimizer.hpp"

namespace mpiddp::optim {

// torch.optim.SGD:
//   g = grad + weight_decay * p
//   momentum != 0: buf = g on the first step, else momentum * buf + (1 - dampening) * g
//                  g = nesterov ? g + momentum * buf : buf
//   p -= lr * g
template <typename T>
class Sgd final : public Optimizer<T> {
 public:
  Sgd(const OptimizerConfig& config, Index parameters);
  void step(T* params, const T* grads, double lr) override;
  std::vector<typename Optimizer<T>::StateBuffer> state_buffers() override;

 private:
  OptimizerConfig config_;
  Index parameters_;
  std::vector<T> momentum_buffer_;  // (P), empty without momentum
};

}  // namespace mpiddp::optim
