#include "mpiddp/nn/sequential.hpp"

#include <algorithm>
#include <cassert>

#include "mpiddp/core/error.hpp"
#include "mpiddp/nn/activation.hpp"
#include "mpiddp/nn/linear.hpp"

namespace mpiddp::nn {

Index ParameterTensor::size() const {
  Index n = 1;
  for (Index d : shape) n *= d;
  return n;
}

namespace {

template <typename T>
std::unique_ptr<Layer<T>> make_layer(const LayerSpec& spec, Index inputs, size_t position) {
  const std::string key = "model.layers[" + std::to_string(position) + "]";
  if (spec.type == "linear") {
    if (spec.out <= 0) throw ConfigError(key + ".out", "a linear layer needs \"out\" >= 1");
    return std::make_unique<Linear<T>>(inputs, spec.out);
  }
  if (spec.type == "tanh") return std::make_unique<Activation<T>>(ActivationKind::kTanh);
  if (spec.type == "relu") return std::make_unique<Activation<T>>(ActivationKind::kRelu);
  if (spec.type == "sigmoid") return std::make_unique<Activation<T>>(ActivationKind::kSigmoid);
  if (spec.type == "gelu") return std::make_unique<Activation<T>>(ActivationKind::kGelu);
  throw ConfigError(key + ".type", "unknown layer type '" + spec.type +
                                       "'; expected linear, tanh, relu, sigmoid or gelu");
}

}  // namespace

template <typename T>
Sequential<T>::Sequential(Index inputs, const std::vector<LayerSpec>& specs, Index max_batch,
                          Index reserved_gradient_slots)
    : inputs_(inputs), max_batch_(max_batch) {
  if (specs.empty()) throw ConfigError("model.layers", "the model needs at least one layer");
  Index width = inputs, widest = inputs;
  for (size_t i = 0; i < specs.size(); ++i) {
    layers_.push_back(make_layer<T>(specs[i], width, i));
    const Index count = layers_.back()->parameter_count();
    const Index out = layers_.back()->outputs(width);
    if (count > 0) {
      tensors_.push_back({std::to_string(i) + ".weight", parameter_count_, {out, width}});
      tensors_.push_back({std::to_string(i) + ".bias", parameter_count_ + out * width, {out}});
    }
    parameter_count_ += count;
    width = out;
    widths_.push_back(width);
    widest = std::max(widest, width);
  }
  outputs_ = width;

  parameters_.assign(parameter_count_, T(0));
  gradient_count_ = parameter_count_ + reserved_gradient_slots;
  own_gradients_ = UntouchedZeros<T>(static_cast<size_t>(gradient_count_));
  gradients_ = own_gradients_.data();
  Index offset = 0;
  for (auto& layer : layers_) {
    parameter_offsets_.push_back(offset);
    offset += layer->parameter_count();
  }
  assert(offset == parameter_count_);
  bind_layers();

  for (Index w : widths_) activations_.emplace_back(w * max_batch_, T(0));
  delta_a_.assign(widest * max_batch_, T(0));
  delta_b_.assign(widest * max_batch_, T(0));
}

template <typename T>
void Sequential<T>::bind_layers() {
  for (size_t l = 0; l < layers_.size(); ++l)
    layers_[l]->bind(parameters_.data() + parameter_offsets_[l], gradients_ + parameter_offsets_[l]);
}

template <typename T>
void Sequential<T>::place_gradients(T* memory) {
  std::copy_n(gradients_, gradient_count_, memory);
  gradients_ = memory;
  bind_layers();
  own_gradients_ = UntouchedZeros<T>();  // give its memory back
}

template <typename T>
double Sequential<T>::multiply_adds_per_sample() const {
  double total = 0;
  for (const ParameterTensor& tensor : tensors_)
    if (tensor.shape.size() == 2) total += static_cast<double>(tensor.size());
  return total;
}

template <typename T>
std::string Sequential<T>::describe() const {
  std::string text = std::to_string(inputs_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    text += "-" + layers_[i]->type();
    if (layers_[i]->parameter_count() > 0) text += std::to_string(widths_[i]);
  }
  return text;
}

template <typename T>
void Sequential<T>::initialize(uint64_t seed) {
  Rng rng(mix_seed(seed, 0x1417));  // the "init" stream of the run seed
  for (auto& layer : layers_) layer->initialize(rng);
}

template <typename T>
void Sequential<T>::zero_gradients() {
  std::fill_n(gradients_, gradient_count_, T(0));
}

template <typename T>
ConstMatrixView<T> Sequential<T>::forward(ConstMatrixView<T> x) {
  assert(x.rows() == inputs_ && x.cols() <= max_batch_);
  batch_ = x.cols();
  const T* in = x.data();
  Index in_width = inputs_;
  for (size_t l = 0; l < layers_.size(); ++l) {
    MatrixView<T> y(activations_[l].data(), widths_[l], batch_);
    layers_[l]->forward(ConstMatrixView<T>(in, in_width, batch_), y);
    in = y.data();
    in_width = widths_[l];
  }
  return ConstMatrixView<T>(in, outputs_, batch_);
}

template <typename T>
MatrixView<T> Sequential<T>::output_gradient() {
  return MatrixView<T>(delta_a_.data(), outputs_, batch_);
}

template <typename T>
void Sequential<T>::backward(ConstMatrixView<T> x, GradientListener* listener) {
  T* dy = delta_a_.data();
  T* dx = delta_b_.data();
  for (size_t l = layers_.size(); l-- > 0;) {
    const Index in_width = l == 0 ? inputs_ : widths_[l - 1];
    const T* in = l == 0 ? x.data() : activations_[l - 1].data();
    ConstMatrixView<T> layer_x(in, in_width, batch_);
    ConstMatrixView<T> layer_y(activations_[l].data(), widths_[l], batch_);
    ConstMatrixView<T> layer_dy(dy, widths_[l], batch_);
    if (l == 0) {
      layers_[l]->backward(layer_x, layer_y, layer_dy, nullptr);
    } else {
      MatrixView<T> layer_dx(dx, in_width, batch_);
      layers_[l]->backward(layer_x, layer_y, layer_dy, &layer_dx);
      std::swap(dy, dx);
    }
    if (listener && layers_[l]->parameter_count() > 0) listener->gradients_ready(parameter_offsets_[l]);
  }
}

template class Sequential<float>;
template class Sequential<double>;

}  // namespace mpiddp::nn
