#include "mpiddp/optim/sgd.hpp"

namespace mpiddp::optim {

template <typename T>
Sgd<T>::Sgd(const OptimizerConfig& config, Index parameters)
    : config_(config), parameters_(parameters) {
  if (config_.momentum != 0.0) momentum_buffer_.assign(parameters_, T(0));
}

template <typename T>
void Sgd<T>::step(T* params, const T* grads, double lr) {
  ++this->steps_;
  const T rate = static_cast<T>(lr), decay = static_cast<T>(config_.weight_decay);
  const T momentum = static_cast<T>(config_.momentum);
  const T keep = static_cast<T>(1.0 - config_.dampening);
  const bool first = this->steps_ == 1;
  T* buf = momentum_buffer_.data();
  for (Index i = 0; i < parameters_; ++i) {
    T g = grads[i];
    if (decay != T(0)) g += decay * params[i];
    if (momentum != T(0)) {
      buf[i] = first ? g : momentum * buf[i] + keep * g;
      g = config_.nesterov ? g + momentum * buf[i] : buf[i];
    }
    params[i] -= rate * g;
  }
}

template <typename T>
std::vector<typename Optimizer<T>::StateBuffer> Sgd<T>::state_buffers() {
  if (momentum_buffer_.empty()) return {};
  return {{"momentum_buffer", &momentum_buffer_}};
}

template class Sgd<float>;
template class Sgd<double>;

}  // namespace mpiddp::optim
