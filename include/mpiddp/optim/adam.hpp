#pragma once
#include "mpiddp/optim/update_rule.hpp"

namespace mpiddp::optim {

// torch.optim.Adam / AdamW (amsgrad off), t = step count from 1:
//   adam:  g = grad + weight_decay * p        adamw: p *= 1 - lr * weight_decay
//   m = beta1 m + (1 - beta1) g ;  v = beta2 v + (1 - beta2) g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
template <typename T>
class Adam final : public UpdateRule<T> {
 public:
  Adam(const OptimizerConfig& config, Index parameters, bool decoupled_weight_decay);

 private:
  std::vector<typename UpdateRule<T>::StateBuffer> own_state_buffers() override;
  void update(T* params, const T* grads, Index begin, Index end, double weight_decay, double lr,
              T gradient_scale) override;
  OptimizerConfig config_;
  bool decoupled_;
  std::vector<T> exp_avg_, exp_avg_sq_;  // (P) each
};

}  // namespace mpiddp::optim
