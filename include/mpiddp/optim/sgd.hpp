#pragma once
#include "mpiddp/optim/update_rule.hpp"

namespace mpiddp::optim {

// torch.optim.SGD:
//   g = grad + weight_decay * p
//   momentum != 0: buf = g on the first step, else momentum * buf + (1 - dampening) * g
//                  g = nesterov ? g + momentum * buf : buf
//   p -= lr * g
template <typename T>
class Sgd final : public UpdateRule<T> {
 public:
  Sgd(const OptimizerConfig& config, Index parameters);

 private:
  std::vector<typename UpdateRule<T>::StateBuffer> own_state_buffers() override;
  void update(T* params, const T* grads, Index begin, Index end, double weight_decay, double lr,
              T gradient_scale) override;
  OptimizerConfig config_;
  std::vector<T> momentum_buffer_;  // (P), empty without momentum
};

}  // namespace mpiddp::optim
