#include <cmath>

#include "mpiddp/optim/sgd.hpp"

namespace mpiddp::optim {

template <typename T>
Sgd<T>::Sgd(const OptimizerConfig& config, Index parameters) : UpdateRule<T>(parameters), config_(config) {
  if (config_.momentum != 0.0) momentum_buffer_.assign(parameters, T(0));
  this->set_weight_decay(config.weight_decay);
}

template <typename T>
void Sgd<T>::update(T* params, const T* grads, Index begin, Index end, double weight_decay, double lr,
                    T gradient_scale) {
  const T rate = static_cast<T>(lr), decay = static_cast<T>(weight_decay);
  const T momentum = static_cast<T>(config_.momentum);
  const T keep = static_cast<T>(1.0 - config_.dampening);
  const bool first = this->steps_ == 1;
  T* buf = momentum_buffer_.data();
  // The common case, plain momentum after the first step, as a branch-free loop the
  // compiler vectorises: it streams three buffers of P, so it is memory-bound.
  if (momentum != T(0) && decay == T(0) && !first && !config_.nesterov) {
    T* __restrict p = params;
    const T* __restrict g = grads;
    T* __restrict v = buf;
    for (Index i = begin; i < end; ++i) {
      v[i] = momentum * v[i] + keep * (g[i] * gradient_scale);
      p[i] -= rate * v[i];
    }
    return;
  }
  if (momentum == T(0) && decay == T(0)) {
    for (Index i = begin; i < end; ++i) params[i] -= rate * (grads[i] * gradient_scale);
    return;
  }
  for (Index i = begin; i < end; ++i) {
    T g = grads[i] * gradient_scale;
    if (decay != T(0)) g = std::fma(decay, params[i], g);  // Note [the decay's one rounding] in adam.cpp
    if (momentum != T(0)) {
      buf[i] = first ? g : momentum * buf[i] + keep * g;
      g = config_.nesterov ? g + momentum * buf[i] : buf[i];
    }
    params[i] -= rate * g;
  }
}

template <typename T>
std::vector<typename UpdateRule<T>::StateBuffer> Sgd<T>::own_state_buffers() {
  if (momentum_buffer_.empty()) return {};
  return {{"momentum_buffer", &momentum_buffer_}};
}

template class Sgd<float>;
template class Sgd<double>;

}  // namespace mpiddp::optim
