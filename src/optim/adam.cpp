#include "mpiddp/optim/adam.hpp"

#include <cmath>

namespace mpiddp::optim {

template <typename T>
Adam<T>::Adam(const OptimizerConfig& config, Index parameters, bool decoupled_weight_decay)
    : UpdateRule<T>(parameters), config_(config), decoupled_(decoupled_weight_decay),
      exp_avg_(parameters, T(0)), exp_avg_sq_(parameters, T(0)) {
  this->set_weight_decay(config.weight_decay);
}

// Note [the decay's one rounding]
// L2 decay adds decay * p to the gradient, and the compiler contracts that into one fused
// multiply-add, p's product unrounded: every release computed g + decay p so. Since the
// gradient is read scaled (clipping's coefficient, UpdateRule::step), the sum holds two
// products, and GCC fused the other one (g * scale, rounded once with the sum), which changed
// the bits even at scale 1. Written as the fma it always was, the scaled gradient is rounded
// on its own, as the buffer clip_grad_norm_ scaled in place was. SGD's decay is the same sum.
template <typename T>
void Adam<T>::update(T* params, const T* grads, Index begin, Index end, double weight_decay, double lr,
                     T gradient_scale) {
  const int64_t t = this->steps_;
  // The bias corrections are computed in double, as PyTorch computes them in Python floats.
  const double bias_correction1 = 1.0 - std::pow(config_.beta1, static_cast<double>(t));
  const double bias_correction2 = 1.0 - std::pow(config_.beta2, static_cast<double>(t));
  const T step_size = static_cast<T>(lr / bias_correction1);
  const T sqrt_bc2 = static_cast<T>(std::sqrt(bias_correction2));
  const T beta1 = static_cast<T>(config_.beta1), beta2 = static_cast<T>(config_.beta2);
  const T eps = static_cast<T>(config_.eps), decay = static_cast<T>(weight_decay);
  const T decoupled_scale = static_cast<T>(1.0 - lr * weight_decay);
  T* m = exp_avg_.data();
  T* v = exp_avg_sq_.data();
  for (Index i = begin; i < end; ++i) {
    T g = grads[i] * gradient_scale;
    if (decoupled_) {
      params[i] *= decoupled_scale;
    } else if (decay != T(0)) {
      g = std::fma(decay, params[i], g);  // Note [the decay's one rounding]
    }
    m[i] = beta1 * m[i] + (T(1) - beta1) * g;
    v[i] = beta2 * v[i] + (T(1) - beta2) * g * g;
    const T denom = std::sqrt(v[i]) / sqrt_bc2 + eps;
    params[i] -= step_size * (m[i] / denom);
  }
}

template <typename T>
std::vector<typename UpdateRule<T>::StateBuffer> Adam<T>::own_state_buffers() {
  return {{"exp_avg", &exp_avg_}, {"exp_avg_sq", &exp_avg_sq_}};
}

template class Adam<float>;
template class Adam<double>;

}  // namespace mpiddp::optim
