#include "mpiddp/nn/model.hpp"

#include <algorithm>
#include <cassert>

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/safetensors.hpp"

namespace mpiddp::nn {

Index ParameterTensor::size() const { return shape_size(shape); }

template <typename T>
Model<T>::Model(const Shape& input, const std::vector<LayerSpec>& specs, Index max_batch,
                Index reserved_gradient_slots, std::optional<ParameterPart> part)
    : input_shape_(input), stack_(specs, input), max_batch_(max_batch) {
  tensors_ = parameter_layout(stack_);
  parameter_count_ = nn::parameter_count(stack_);
  tie_tensors();
  Index values = 0, counters = 0;
  for (const BufferSpec& b : stack_.buffers()) {
    BufferTensor tensor;
    tensor.name = b.name;
    tensor.shape = b.shape;
    tensor.type = b.type;
    Index& offset = b.type == BufferType::kReal ? values : counters;
    tensor.offset = offset;
    offset += shape_size(b.shape);
    buffer_tensors_.push_back(std::move(tensor));
  }
  if (part) {
    assert(0 <= part->begin && part->begin <= part->end && part->end <= parameter_count_);
    part_begin_ = part->begin;
    part_end_ = part->end;
    own_parameters_.assign(part_end_ - part_begin_, T(0));
    const std::vector<Index>& bounds = stack_.layer_parameter_offsets();
    Index largest = 0;
    for (size_t l = 0; l < stack_.size(); ++l) largest = std::max(largest, bounds[l + 1] - bounds[l]);
    placeholder_.assign(largest, T(0));
    layer_parameters_.assign(stack_.size(), nullptr);
    for (size_t l = 0; l < stack_.size(); ++l)
      if (bounds[l + 1] > bounds[l]) layer_parameters_[l] = placeholder_.data();
  } else {
    own_parameters_.assign(parameter_count_, T(0));
    parameters_ = own_parameters_.data();
    part_end_ = parameter_count_;
  }
  gradient_count_ = parameter_count_ + reserved_gradient_slots;
  own_gradients_ = UntouchedZeros<T>(static_cast<size_t>(gradient_count_));
  gradients_ = own_gradients_.data();
  added_to_ = stack_.gradients_added_to();
  if (gradient_count_ > parameter_count_) added_to_.emplace_back(parameter_count_, gradient_count_);
  buffer_values_.assign(values, T(0));
  buffer_counters_.assign(counters, 0);
  scratch_.assign(stack_.scratch_bytes(max_batch_), std::byte{0});
  transient_.assign(stack_.transient_bytes(max_batch_), std::byte{0});
  output_.assign(outputs() * max_batch_, T(0));
  output_gradient_.assign(outputs() * max_batch_, T(0));
  bind_layers();
}

std::vector<ParameterTensor> resolve_ties(const std::vector<ParameterTensor>& layout,
                                          const std::vector<TiedTensor>& ties) {
  // Each tied tensor must name an earlier layer's tensor of the shape the layer needs.
  std::vector<ParameterTensor> tied;
  for (const TiedTensor& tie : ties) {
    const auto target = std::find_if(layout.begin(), layout.end(),
                                     [&](const ParameterTensor& t) { return t.name == tie.target; });
    if (target == layout.end()) {
      std::string names;
      for (const auto& t : layout) names += (names.empty() ? "" : ", ") + t.name;
      throw ConfigError(tie.key, "'" + tie.target + "' names no tensor of the model; its tensors are " + names);
    }
    if (target->shape != tie.shape)
      throw ConfigError(tie.key, "'" + tie.target + "' has shape " + io::shape_text(target->shape) +
                                     " but the layer needs " + io::shape_text(tie.shape));
    if (target->offset >= tie.position)
      throw ConfigError(tie.key, "'" + tie.target + "' is not an earlier layer's tensor; a layer can use the "
                                     "tensor of a layer before it only");
    tied.push_back({tie.name, target->offset, target->shape});
  }
  return tied;
}

size_t layer_holding(const std::vector<Index>& bounds, Index at) {
  size_t l = 0;
  while (bounds[l + 1] <= at) ++l;
  return l;
}

// A tied tensor's gradients have two writers: the owner's whole layer (in the top stack) adds
// to them, never overwrites, and is cleared before a pass that overwrites the others.
template <typename T>
void Model<T>::tie_tensors() {
  tied_ = resolve_ties(tensors_, stack_.tied_tensors());
  std::vector<std::pair<Index, Index>> shared;
  for (const ParameterTensor& t : tied_) shared.emplace_back(t.offset, t.offset + t.size());
  stack_.share_gradients(shared);
}

template <typename T>
LayerMemory<T> Model<T>::memory(T* gradients) {
  LayerMemory<T> m;
  m.parameters = parameters_;
  m.gradients = gradients;
  m.model_tensors = &tensors_;
  tensor_parameters_.resize(tensors_.size());
  for (size_t t = 0; t < tensors_.size(); ++t)
    tensor_parameters_[t] = parameters_ ? parameters_ + tensors_[t].offset : nullptr;
  m.tensor_parameters = &tensor_parameters_;
  tensor_gradients_.resize(tensors_.size());
  for (size_t t = 0; t < tensors_.size(); ++t) tensor_gradients_[t] = gradients ? gradients + tensors_[t].offset : nullptr;
  m.tensor_gradients = &tensor_gradients_;
  m.buffers = buffer_values_.data();
  m.counters = buffer_counters_.data();
  m.scratch = scratch_.data();
  m.transient = transient_.data();
  m.max_batch = max_batch_;
  return m;
}

template <typename T>
void Model<T>::place_gradients(T* memory_at) {
  std::copy_n(gradients_, gradient_count_, memory_at);
  gradients_ = memory_at;
  bind_layers();
  own_gradients_ = UntouchedZeros<T>();
}

template <typename T>
void Model<T>::adopt_parameters(T* memory_at) {
  parameters_ = memory_at;
  bind_layers();
  AlignedVector<T>().swap(own_parameters_);  // "= {}" would keep the capacity
}

template <typename T>
void Model<T>::bind_gradient_views(T* memory_at) {
  bind_layers(memory_at ? memory_at : gradients_);
}

template <typename T>
void Model<T>::bind_unit_gradients(const std::vector<T*>& layer_gradients) {
  assert(layer_gradients.size() == stack_.size());
  layer_gradients_ = layer_gradients;
  own_gradients_ = UntouchedZeros<T>();
  gradients_ = nullptr;
  bind_layers();
}

template <typename T>
void Model<T>::bind_unit_parameters(const std::vector<T*>& layer_parameters) {
  assert(parameters_ == nullptr && layer_parameters.size() == stack_.size());
  layer_parameters_ = layer_parameters;
  bind_layers();
  AlignedVector<T>().swap(placeholder_);
}

template <typename T>
void Model<T>::bind_layers(T* gradients) {
  LayerMemory<T> m = memory(layer_gradients_.empty() ? gradients : nullptr);
  // A tensor's gradient (staged by unit) and its values (gathered by unit) lie in its layer's
  // memory, at its place within the layer.
  const std::vector<Index>& bounds = stack_.layer_parameter_offsets();
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const size_t l = layer_holding(bounds, tensors_[t].offset);
    const Index within = tensors_[t].offset - bounds[l];
    if (!layer_gradients_.empty()) tensor_gradients_[t] = layer_gradients_[l] + within;
    if (!layer_parameters_.empty()) tensor_parameters_[t] = layer_parameters_[l] + within;
  }
  stack_.bind_units(m, layer_parameters_.empty() ? nullptr : &layer_parameters_,
                    layer_gradients_.empty() ? nullptr : &layer_gradients_);
}

template <typename T>
std::string Model<T>::describe() const {
  return shape_tag(input_shape_) + "-" + stack_.describe();
}

template <typename T>
void Model<T>::initialize(uint64_t seed) {
  Rng rng(mix_seed(seed, 0x1417));  // the "init" stream of the run seed
  if (parameters_ != nullptr) return stack_.initialize(rng);
  // A part: each layer's parameters whole in turn, in the layers' order (the same draws as a
  // whole model's), and the part's share of them kept.
  const std::vector<Index>& bounds = stack_.layer_parameter_offsets();
  for (size_t l = 0; l < stack_.size(); ++l) {
    stack_.initialize_layer(l, rng);
    const Index lo = std::max(bounds[l], part_begin_), hi = std::min(bounds[l + 1], part_end_);
    if (lo < hi)
      std::copy_n(layer_parameters_[l] + (lo - bounds[l]), hi - lo, own_parameters_.data() + (lo - part_begin_));
  }
}

template <typename T>
void Model<T>::zero_gradients() {
  std::fill_n(gradients_, gradient_count_, T(0));
}

// Note [gradients written, not cleared]: a step's backward used to add every parameter
// gradient onto a buffer cleared just before it: one more pass over the whole buffer at
// memory speed, 9-11 ms a step for wide's 84 MB on a 2-vCPU Xeon (docs/benchmarks.md).
// The first micro-batch's backward now writes them instead (PassContext::
// overwrite_gradients): a linear layer's weight gradient is its product with beta 0. Where
// the library sums into a cleared C either way (OpenBLAS, Eigen's blocked products) that is
// the sum it added onto zeros (0 + s = s, but for the sign of a zero); a product small
// enough for Eigen to evaluate coefficient by coefficient may round otherwise. Either way
// every rank and every run takes the same path, so replicas stay equal and runs repeat. Only
// the gradients of layers that cannot overwrite (small ones: convolutions, BatchNorm, a
// user's layer) and the reserved slots are cleared first.
template <typename T>
void Model<T>::prepare_gradient_overwrite() {
  for (const auto& [first, end] : added_to_) std::fill(gradients_ + first, gradients_ + end, T(0));
}

template <typename T>
std::vector<size_t> Model<T>::tensor_bounds() const {
  std::vector<size_t> bounds;
  for (const auto& tensor : tensors_) bounds.push_back(static_cast<size_t>(tensor.offset));
  bounds.push_back(static_cast<size_t>(parameter_count_));
  return bounds;
}

template <typename T>
Index Model<T>::token_vocabulary() const {
  const auto* first = dynamic_cast<const TakesTokenIds<T>*>(&stack_.layer(0));
  return first ? first->vocabulary() : 0;
}

template <typename T>
ConstMatrixView<T> Model<T>::forward(const PassContext& context, const BatchInput<T>& x) {
  batch_ = x.columns;
  MatrixView<T> y(output_.data(), outputs(), batch_);
  stack_.forward(context, x, y);
  return ConstMatrixView<T>(output_.data(), outputs(), batch_);
}

template <typename T>
MatrixView<T> Model<T>::output_gradient() {
  return MatrixView<T>(output_gradient_.data(), outputs(), batch_);
}

template <typename T>
void Model<T>::backward(const PassContext& context, const BatchInput<T>& x, GradientListener* listener) {
  stack_.backward(context, x, ConstMatrixView<T>(output_.data(), outputs(), batch_),
                  ConstMatrixView<T>(output_gradient_.data(), outputs(), batch_), nullptr,
                  listener);
}

template class Model<float>;
template class Model<double>;

}  // namespace mpiddp::nn
