#include "mpiddp/nn/sequential.hpp"

#include <algorithm>
#include <cassert>

#include "mpiddp/core/error.hpp"

namespace mpiddp::nn {

template <typename T>
Index Layer<T>::parameter_count() const {
  Index count = 0;
  for (const TensorSpec& tensor : parameters()) count += shape_size(tensor.shape);
  return count;
}

template <typename T>
typename Sequential<T>::Chain Sequential<T>::build_chain(const std::vector<LayerSpec>& specs,
                                                         const Shape& input) {
  if (specs.empty()) throw ConfigError("model.layers", "the model needs at least one layer");
  Chain layers;
  Shape shape = input;
  for (const LayerSpec& spec : specs) {
    layers.push_back(build_layer<T>(spec, shape));
    if (layers.size() > 1 && dynamic_cast<const TakesTokenIds<T>*>(layers.back().get()))
      throw ConfigError(spec.key, spec.type + " takes token ids, so it must be the model's first layer");
    shape = layers.back()->output_shape();
  }
  return layers;
}

template <typename T>
Sequential<T>::Sequential(const std::vector<LayerSpec>& specs, const Shape& input)
    : Sequential(build_chain(specs, input), input) {}

template <typename T>
Sequential<T>::Sequential(Chain layers, const Shape& input)
    : Layer<T>(input, layers.back()->output_shape()), layers_(std::move(layers)),
      token_input_(dynamic_cast<TakesTokenIds<T>*>(layers_.front().get())) {
  Index offset = 0;
  for (const auto& layer : layers_) {
    parameter_offsets_.push_back(offset);
    offset += layer->parameter_count();
  }
  parameter_offsets_.push_back(offset);  // the end, so layer l has offsets_[l+1] - offsets_[l]
  shared_.assign(layers_.size(), 0);
}

template <typename T>
std::string Sequential<T>::describe() const {
  std::string text;
  for (const auto& layer : layers_) text += (text.empty() ? "" : "-") + layer->describe();
  return text;
}

template <typename T>
std::vector<TensorSpec> Sequential<T>::parameters() const {
  std::vector<TensorSpec> all;
  for (size_t l = 0; l < layers_.size(); ++l)
    for (TensorSpec t : layers_[l]->parameters()) {
      t.name = std::to_string(l) + "." + t.name;
      all.push_back(std::move(t));
    }
  return all;
}

template <typename T>
std::vector<BufferSpec> Sequential<T>::buffers() const {
  std::vector<BufferSpec> all;
  for (size_t l = 0; l < layers_.size(); ++l)
    for (BufferSpec b : layers_[l]->buffers()) {
      b.name = std::to_string(l) + "." + b.name;
      all.push_back(std::move(b));
    }
  return all;
}

template <typename T>
std::vector<TiedTensor> Sequential<T>::tied_tensors() const {
  std::vector<TiedTensor> all;
  for (size_t l = 0; l < layers_.size(); ++l)
    for (TiedTensor t : layers_[l]->tied_tensors()) {
      t.name = std::to_string(l) + "." + t.name;
      t.position += parameter_offsets_[l];
      all.push_back(std::move(t));
    }
  return all;
}

template <typename T>
void Sequential<T>::share_gradients(const std::vector<std::pair<Index, Index>>& ranges) {
  for (size_t l = 0; l < layers_.size(); ++l)
    for (const auto& [first, end] : ranges)
      if (first < parameter_offsets_[l + 1] && end > parameter_offsets_[l]) shared_[l] = 1;
}

namespace {

// The widest input of any layer but the first: the size of one ping-pong buffer per sample.
template <typename T>
Index widest_inner_input(const std::vector<std::unique_ptr<Layer<T>>>& layers) {
  Index widest = 0;
  for (size_t l = 1; l < layers.size(); ++l) widest = std::max(widest, layers[l]->inputs());
  return widest;
}

}  // namespace

// Scratch layout: each inner activation, the two ping-pong buffers, then each layer's own.
template <typename T>
size_t Sequential<T>::scratch_bytes(Index max_batch) const {
  size_t bytes = 0;
  for (size_t l = 0; l + 1 < layers_.size(); ++l)
    bytes += scratch_values_bytes<T>(layers_[l]->outputs() * max_batch);
  bytes += 2 * scratch_values_bytes<T>(widest_inner_input(layers_) * max_batch);
  for (const auto& layer : layers_) bytes += align_scratch(layer->scratch_bytes(max_batch));
  return bytes;
}

template <typename T>
size_t Sequential<T>::transient_bytes(Index max_batch) const {
  size_t largest = 0;
  for (const auto& layer : layers_) largest = std::max(largest, layer->transient_bytes(max_batch));
  return largest;
}

template <typename T>
double Sequential<T>::multiply_adds_per_sample() const {
  double total = 0.0;
  for (const auto& layer : layers_) total += layer->multiply_adds_per_sample();
  return total;
}

template <typename T>
void Sequential<T>::bind(const LayerMemory<T>& memory) {
  bind_layers(memory, nullptr, nullptr);
}

template <typename T>
void Sequential<T>::bind_units(const LayerMemory<T>& memory, const std::vector<T*>* layer_parameters,
                               const std::vector<T*>* layer_gradients) {
  assert(!layer_parameters || layer_parameters->size() == layers_.size());
  assert(!layer_gradients || layer_gradients->size() == layers_.size());
  bind_layers(memory, layer_parameters, layer_gradients);
}

template <typename T>
void Sequential<T>::bind_layers(const LayerMemory<T>& memory, const std::vector<T*>* layer_parameters,
                                const std::vector<T*>* layer_gradients) {
  max_batch_ = memory.max_batch;
  std::byte* scratch = memory.scratch;
  activations_.clear();
  for (size_t l = 0; l + 1 < layers_.size(); ++l)
    activations_.push_back(take_scratch_values<T>(scratch, layers_[l]->outputs() * max_batch_));
  const Index widest = widest_inner_input(layers_);
  delta_a_ = take_scratch_values<T>(scratch, widest * max_batch_);
  delta_b_ = take_scratch_values<T>(scratch, widest * max_batch_);

  T* buffers = memory.buffers;
  int64_t* counters = memory.counters;
  for (size_t l = 0; l < layers_.size(); ++l) {
    LayerMemory<T> own = memory;
    own.parameters = layer_parameters ? (*layer_parameters)[l] : memory.parameters + parameter_offsets_[l];
    own.gradients = layer_gradients ? (*layer_gradients)[l] : memory.gradients + parameter_offsets_[l];
    own.buffers = buffers;
    own.counters = counters;
    own.scratch = scratch;  // own.transient stays the stack's: its layers run one at a time
    for (const BufferSpec& b : layers_[l]->buffers()) {
      if (b.type == BufferType::kReal) buffers += shape_size(b.shape);
      else counters += shape_size(b.shape);
    }
    scratch += align_scratch(layers_[l]->scratch_bytes(max_batch_));
    layers_[l]->bind(own);
  }
}

template <typename T>
void Sequential<T>::initialize(Rng& rng) {
  for (size_t l = 0; l < layers_.size(); ++l) initialize_layer(l, rng);
}

template <typename T>
bool Sequential<T>::supports_chunked_pass(Index chunk) const {
  return std::all_of(layers_.begin(), layers_.end(),
                     [chunk](const auto& layer) { return layer->supports_chunked_pass(chunk); });
}

template <typename T>
bool Sequential<T>::can_run_forward_twice() const {
  return std::all_of(layers_.begin(), layers_.end(),
                     [](const auto& layer) { return layer->can_run_forward_twice(); });
}

template <typename T>
bool Sequential<T>::adds_to_gradients(size_t l) const {
  return parameter_offsets_[l + 1] > parameter_offsets_[l] && !overwrites_gradients(l);
}

template <typename T>
bool Sequential<T>::can_overwrite_gradients() const {
  for (size_t l = 0; l < layers_.size(); ++l)
    if (adds_to_gradients(l)) return false;
  return true;
}

template <typename T>
std::vector<std::pair<Index, Index>> Sequential<T>::gradients_added_to() const {
  std::vector<std::pair<Index, Index>> ranges;
  for (size_t l = 0; l < layers_.size(); ++l)
    if (adds_to_gradients(l)) ranges.emplace_back(parameter_offsets_[l], parameter_offsets_[l + 1]);
  return ranges;
}

template <typename T>
void Sequential<T>::install_hooks(LayerHooks* hooks, const std::string& prefix, Index first_parameter, int depth) {
  hooks_ = hooks;
  units_.clear();
  for (size_t l = 0; l < layers_.size(); ++l) {
    const std::string key = prefix + std::to_string(l);
    const Index first = first_parameter + parameter_offsets_[l];
    units_.push_back({key, layers_[l]->type(), first, first_parameter + parameter_offsets_[l + 1], depth});
    layers_[l]->install_hooks(hooks, key + ".", first, depth + 1);
  }
}

template <typename T>
void Sequential<T>::forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) {
  forward(context, BatchInput<T>::of_values(x), y);
}

template <typename T>
void Sequential<T>::forward(const PassContext& context, const BatchInput<T>& x, MatrixView<T> y) {
  const Index batch = x.columns;
  assert(x.rows == this->inputs() && batch <= max_batch_ && (x.kind == InputKind::kTokenIds) == takes_token_ids());
  const T* in = x.values;
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer<T>& layer = *layers_[l];
    T* out = l + 1 < layers_.size() ? activations_[l] : y.data();
    MatrixView<T> layer_y(out, layer.outputs(), batch);
    if (hooks_) hooks_->before_forward(units_[l]);
    if (l == 0 && token_input_)
      token_input_->forward_ids(context, x.token_ids, batch, layer_y);
    else
      layer.forward(context, ConstMatrixView<T>(in, layer.inputs(), batch), layer_y);
    in = out;
  }
}

template <typename T>
void Sequential<T>::backward(const PassContext& context, ConstMatrixView<T> x,
                             ConstMatrixView<T> y, ConstMatrixView<T> dy, MatrixView<T>* dx) {
  backward(context, BatchInput<T>::of_values(x), y, dy, dx, nullptr);
}

template <typename T>
void Sequential<T>::backward(const PassContext& context, const BatchInput<T>& x,
                             ConstMatrixView<T> y, ConstMatrixView<T> dy, MatrixView<T>* dx,
                             GradientListener* listener) {
  const Index batch = x.columns;
  const T* layer_dy = dy.data();
  T* next_dx = delta_a_;
  // A layer that cannot overwrite its gradients adds onto the zeros they were cleared to.
  PassContext adding = context;
  adding.overwrite_gradients = false;
  for (size_t l = layers_.size(); l-- > 0;) {
    Layer<T>& layer = *layers_[l];
    const PassContext& layer_context = overwrites_gradients(l) ? context : adding;
    const T* in = l == 0 ? x.values : activations_[l - 1];
    const T* out = l + 1 < layers_.size() ? activations_[l] : y.data();
    ConstMatrixView<T> layer_x(in, layer.inputs(), batch);
    ConstMatrixView<T> layer_y(out, layer.outputs(), batch);
    ConstMatrixView<T> layer_dy_view(layer_dy, layer.outputs(), batch);
    if (hooks_) hooks_->before_backward(units_[l]);
    if (l == 0 && token_input_) {
      token_input_->backward_ids(layer_context, x.token_ids, batch, layer_dy_view);
    } else if (l == 0) {
      layer.backward(layer_context, layer_x, layer_y, layer_dy_view, dx);
    } else {
      MatrixView<T> layer_dx(next_dx, layer.inputs(), batch);
      layer.backward(layer_context, layer_x, layer_y, layer_dy_view, &layer_dx);
      layer_dy = next_dx;
      next_dx = next_dx == delta_a_ ? delta_b_ : delta_a_;
    }
    if (hooks_) hooks_->after_backward(units_[l]);
    if (listener && parameter_offsets_[l + 1] > parameter_offsets_[l]) listener->gradients_ready(parameter_offsets_[l]);
  }
}

template class Layer<float>;
template class Layer<double>;
template class Sequential<float>;
template class Sequential<double>;

}  // namespace mpiddp::nn
