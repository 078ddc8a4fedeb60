#pragma once
// A model: a Sequential with its memory. It owns one flat parameter buffer, one flat
// gradient buffer, the buffers' memory, one scratch arena and one transient arena (Note
// [transient memory] in nn/layer.hpp), and hands each layer its
// views (Note [one buffer, many views] in nn/layer.hpp), in order, with a running offset.
//
// Activation memory is sized once for max_batch samples: forward and backward only write
// into memory made here, so a training step allocates nothing.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/nn/layer_registry.hpp"
#include "mpiddp/nn/sequential.hpp"

namespace mpiddp::nn {

// A buffer tensor: offset into buffer_values() (kReal) or buffer_counters() (kInt64).
struct BufferTensor : ParameterTensor {
  BufferType type = BufferType::kReal;
};

// Flat buffers: 64-byte aligned, on huge pages from 2 MiB (Note [allocate once, keep it mapped]).
template <typename T>
using AlignedVector = std::vector<T, HugePageAllocator<T>>;

// Bytes of activation memory a Model of `stack` holds for max_batch samples: the layers'
// scratch and transient memory, the output and its gradient.
template <typename T>
size_t activation_bytes(const Sequential<T>& stack, Index max_batch) {
  return stack.scratch_bytes(max_batch) + stack.transient_bytes(max_batch) +
         2 * static_cast<size_t>(stack.outputs() * max_batch) * sizeof(T);
}

// The parameters of `stack`'s trained tensors, each once: P.
template <typename T>
Index parameter_count(const Sequential<T>& stack) {
  Index count = 0;
  for (const TensorSpec& t : stack.parameters()) count += shape_size(t.shape);
  return count;
}

// The stack's trained tensors laid out in one buffer, in order: each one's name, offset and
// shape (the Model's tensors()).
template <typename T>
std::vector<ParameterTensor> parameter_layout(const Sequential<T>& stack) {
  std::vector<ParameterTensor> layout;
  Index offset = 0;
  for (const TensorSpec& t : stack.parameters()) {
    layout.push_back({t.name, offset, t.shape});
    offset += shape_size(t.shape);
  }
  return layout;
}

// The tied tensors found in the layout: each under the layer's name for it, at its target's
// offset and shape (the Model's tied_tensors()). ConfigError naming the tie's key when its
// target is no tensor of the layout, has another shape, or is not an earlier layer's.
std::vector<ParameterTensor> resolve_ties(const std::vector<ParameterTensor>& layout,
                                          const std::vector<TiedTensor>& ties);

// The layer whose parameters [bounds[l], bounds[l + 1]) hold offset `at` (at < bounds.back()).
size_t layer_holding(const std::vector<Index>& bounds, Index at);

// The model's own layers as units of its parameter buffer: layer l holds [bounds[l],
// bounds[l + 1]) (a residual with its whole body), and tied[l] says whether a later layer is
// tied to one of its tensors, so that its gradients have a second writer (Model::tie_tensors).
// ZeRO-2's staging of the gradients by unit is planned from these (train/gradient_staging.hpp).
struct LayerUnits {
  std::vector<Index> bounds;  // (layers + 1)
  std::vector<char> tied;     // (layers)
};
template <typename T>
LayerUnits layer_units(const Sequential<T>& stack) {
  LayerUnits units{stack.layer_parameter_offsets(), std::vector<char>(stack.size(), 0)};
  for (const ParameterTensor& tied : resolve_ties(parameter_layout(stack), stack.tied_tensors()))
    units.tied[layer_holding(units.bounds, tied.offset)] = 1;
  return units;
}

// What a Model of these layers will hold, known without allocating it: memory.limit_mb's
// check (train/memory_plan.hpp) comes before the model is built.
struct ModelSize {
  Index parameters = 0;         // P
  Index buffer_values = 0;      // buffer_value_count(): the real buffers (running statistics)
  size_t activation_bytes = 0;  // activation_bytes() for max_batch
  LayerUnits units;             // layer_units()
};
template <typename T>
ModelSize model_size(const Shape& input, const std::vector<LayerSpec>& specs, Index max_batch) {
  const Sequential<T> stack(specs, input);
  Index buffer_values = 0;
  for (const BufferSpec& b : stack.buffers())
    if (b.type == BufferType::kReal) buffer_values += shape_size(b.shape);
  return {parameter_count(stack), buffer_values, activation_bytes(stack, max_batch), layer_units(stack)};
}

// The parameters [begin, end) of P that a model keeps alone (reduce.shard "parameters").
struct ParameterPart {
  Index begin = 0, end = 0;
};

template <typename T>
class Model {
 public:
  // reserved_gradient_slots: extra elements after the P gradients, reduced together with
  // them by the trainer (see Note [the loss rides with the gradients] in train/data_parallel_step.cpp).
  // part: Note [parameters gathered by unit] (train/sharded_parameters_step.hpp): the model
  // keeps these parameters alone (parameter_part()), never all P: parameters() is null, and
  // until bind_unit_parameters its layers read their parameters in a placeholder the size of
  // the largest layer's, where initialize() makes each layer's in turn.
  Model(const Shape& input, const std::vector<LayerSpec>& specs, Index max_batch,
        Index reserved_gradient_slots = 0, std::optional<ParameterPart> part = std::nullopt);

  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return stack_.output_shape(); }
  Index inputs() const { return stack_.inputs(); }
  Index outputs() const { return stack_.outputs(); }
  Index max_batch() const { return max_batch_; }
  Index parameter_count() const { return parameter_count_; }
  // The trained tensors, each once, in buffer order.
  const std::vector<ParameterTensor>& tensors() const { return tensors_; }
  // The names under which layers use another layer's tensor (TiedTensor: "11.weight" for
  // "0.weight"), each at its target's offset: with tensors(), a PyTorch state_dict's keys.
  const std::vector<ParameterTensor>& tied_tensors() const { return tied_; }
  // Where each tensor begins in the parameter (and gradient) buffer, in order, then P: tensor
  // t spans [bounds[t], bounds[t + 1]). The reduction's buckets and the deterministic sums'
  // grids are cut there.
  std::vector<size_t> tensor_bounds() const;
  const std::vector<BufferTensor>& buffer_tensors() const { return buffer_tensors_; }
  // Multiply-adds of one sample's forward pass, the sum of the layers' own figures.
  double multiply_adds_per_sample() const { return stack_.multiply_adds_per_sample(); }
  std::vector<kernels::GemmCall> gemm_calls(Index batch) const {
    std::vector<kernels::GemmCall> calls;
    stack_.gemm_calls(batch, calls);
    return calls;
  }
  // "6-linear48-tanh-linear1", "1x28x28-conv2d8k3s1p1-relu-...": identifies the
  // architecture in hashes, logs and checkpoints.
  std::string describe() const;
  const Sequential<T>& layers() const { return stack_; }
  // Calls hooks around every layer's passes, the residuals' body layers included
  // (nn/layer_hooks.hpp); null removes them. The hooks must outlive the passes.
  void install_hooks(LayerHooks* hooks) { stack_.install_hooks(hooks, "", 0, 0); }
  // Bytes of activation memory for max_batch: the layers' scratch and transient memory, the
  // output and its gradient, as allocated (memory.limit_mb's plan, nn::activation_bytes, must
  // match it).
  size_t activation_bytes() const {
    return scratch_.size() + transient_.size() + (output_.size() + output_gradient_.size()) * sizeof(T);
  }

  // All P parameters; null where the model keeps a part of them alone.
  T* parameters() { return parameters_; }
  // Whether it holds all P (a replica), or was built holding a part alone (reduce.shard
  // "parameters"): then each value has one owner, and nothing is broadcast or shared.
  bool holds_all_parameters() const { return parameters_ != nullptr; }
  const T* parameters() const { return parameters_; }
  // The parameters [parameter_part_begin(), parameter_part_end()) this model holds: all P, or
  // the constructor's part.
  T* parameter_part() { return parameters_ ? parameters_ + part_begin_ : own_parameters_.data(); }
  const T* parameter_part() const { return parameters_ ? parameters_ + part_begin_ : own_parameters_.data(); }
  Index parameter_part_begin() const { return part_begin_; }
  Index parameter_part_end() const { return part_end_; }
  // P gradients followed by the reserved slots.
  T* gradients() { return gradients_; }
  const T* gradients() const { return gradients_; }
  // The real buffers (running statistics) and the int64 ones (num_batches_tracked).
  T* buffer_values() { return buffer_values_.data(); }
  const T* buffer_values() const { return buffer_values_.data(); }
  Index buffer_value_count() const { return static_cast<Index>(buffer_values_.size()); }
  int64_t* buffer_counters() { return buffer_counters_.data(); }
  const int64_t* buffer_counters() const { return buffer_counters_.data(); }
  Index buffer_counter_count() const { return static_cast<Index>(buffer_counters_.size()); }

  // P + reserved slots: the length of gradients().
  Index gradient_count() const { return gradient_count_; }
  // Moves the gradient buffer, contents and all, into gradient_count() elements of memory
  // the caller owns and keeps alive as long as the model: the gradient reducer's shared
  // memory, where the ranks sum it without copying it (see GradientReducer).
  void place_gradients(T* memory);
  // The layers' parameter views move to `memory` (parameter_count() elements the caller
  // keeps alive as long as the model, holding the values already: the node's one copy of
  // the parameters, Note [parameters once per node]), and the model's own buffer is given
  // back.
  void adopt_parameters(T* memory);
  // Points the layers' gradient views at `memory` (parameter_count() values, the caller's)
  // without copying: backward then adds into it, while gradients() still names the model's
  // buffer. Null points them back at gradients(). The deterministic step has each chunk's
  // backward write into that chunk's own term, rather than into the buffer and then a copy.
  void bind_gradient_views(T* memory);
  // The model's own layers as units (layer_units): where bind_unit_gradients stages them.
  LayerUnits units() const { return layer_units(stack_); }
  // Note [gradients staged by unit] (train/gradient_staging.hpp): layer l of the model's own
  // writes its gradients at layer_gradients[l] (its units().bounds' count of values, the
  // caller's, alive while backward may run; null for a layer without parameters), and a tensor
  // tied to it into the same memory. The model's gradient buffer is given back: gradients() is
  // null from here on, and the caller clears what a pass adds to (gradients_added_to).
  void bind_unit_gradients(const std::vector<T*>& layer_gradients);
  // Note [parameters gathered by unit]: a model that keeps a part of its parameters alone reads
  // layer l's parameters at layer_parameters[l] (its units().bounds' count of values, the
  // caller's, where the caller gathers them before the layer computes; null for a layer
  // without parameters), a tensor tied to it there too. The placeholder is given back.
  void bind_unit_parameters(const std::vector<T*>& layer_parameters);
  // The ranges of the parameter buffer [first, end) that a backward pass with
  // overwrite_gradients adds to, so that they are cleared before it (prepare_gradient_overwrite
  // clears them in the model's buffer).
  const std::vector<std::pair<Index, Index>>& gradients_added_to() const { return added_to_; }

  // Seeded initialisation, PyTorch's default scheme layer by layer; buffers to their start.
  // A model keeping a part makes each layer's parameters whole in turn where its layers read
  // them and keeps its part of them: the same values as a whole model's. Before
  // bind_unit_parameters.
  void initialize(uint64_t seed);
  void zero_gradients();
  // Readies the gradients for a backward pass with PassContext::overwrite_gradients: clears
  // only what that pass adds to (Note [gradients written, not cleared] in sequential.cpp).
  void prepare_gradient_overwrite();

  // What the first layer takes: values, or token ids (nn/batch_input.hpp).
  InputKind input_kind() const { return stack_.takes_token_ids() ? InputKind::kTokenIds : InputKind::kValues; }
  // The vocabulary token ids must lie in (0 when the model takes values).
  Index token_vocabulary() const;

  // x: (inputs, B) values or token ids, B <= max_batch -> (outputs, B). The view stays valid
  // until the next forward.
  ConstMatrixView<T> forward(const PassContext& context, const BatchInput<T>& x);
  ConstMatrixView<T> forward(const PassContext& context, ConstMatrixView<T> x) {
    return forward(context, BatchInput<T>::of_values(x));
  }
  // Where the loss writes dLoss/dout: (outputs, B) for the batch of the last forward.
  MatrixView<T> output_gradient();
  // Back-propagates output_gradient() through the last forward pass (of the same context)
  // and adds the parameter gradients into gradients(). x must be the input of that forward
  // pass. A listener hears after each layer with parameters that its gradients (and all
  // later ones) are final.
  void backward(const PassContext& context, const BatchInput<T>& x, GradientListener* listener = nullptr);
  void backward(const PassContext& context, ConstMatrixView<T> x, GradientListener* listener = nullptr) {
    backward(context, BatchInput<T>::of_values(x), listener);
  }

  // A training pass of one process (PassContext's defaults), for tests and tools.
  ConstMatrixView<T> forward(ConstMatrixView<T> x) { return forward(PassContext{}, x); }
  void backward(ConstMatrixView<T> x, GradientListener* listener = nullptr) {
    backward(PassContext{}, x, listener);
  }

 private:
  // The layers' memory, their gradients from `gradients` (the model's buffer, or another of
  // its layout).
  LayerMemory<T> memory(T* gradients);
  // Binds the layers to the model's memory: their parameters and gradients in the model's
  // buffers at `gradients` (the gradient buffer, or another of its layout), or where
  // bind_unit_parameters and bind_unit_gradients put them.
  void bind_layers(T* gradients);
  void bind_layers() { bind_layers(gradients_); }
  // Resolves the layers' TiedTensors into tied_ (a ConfigError names the key that does not fit).
  void tie_tensors();

  Shape input_shape_;
  Sequential<T> stack_;
  Index max_batch_, parameter_count_ = 0, gradient_count_ = 0;

  Index batch_ = 0;  // batch size of the last forward
  std::vector<ParameterTensor> tensors_;
  std::vector<ParameterTensor> tied_;
  std::vector<T*> tensor_parameters_;        // (tensors) LayerMemory::tensor_parameters
  std::vector<T*> tensor_gradients_;         // (tensors) LayerMemory::tensor_gradients
  std::vector<T*> layer_parameters_;         // (layers) with a part: bind_unit_parameters', else the placeholder
  std::vector<T*> layer_gradients_;          // (layers) bind_unit_gradients', else empty
  // What prepare_gradient_overwrite clears: the gradients of layers that only add, and the
  // reserved slots.
  std::vector<std::pair<Index, Index>> added_to_;
  std::vector<BufferTensor> buffer_tensors_;
  AlignedVector<T> own_parameters_;          // (P), unless placed elsewhere; the kept part
  T* parameters_ = nullptr;                  // (P): own_parameters_ or placed; null when parted
  Index part_begin_ = 0, part_end_ = 0;      // parameter_part()'s: [0, P) unless parted
  AlignedVector<T> placeholder_;             // with a part: the largest layer's parameters, until bound
  UntouchedZeros<T> own_gradients_;          // (P + reserved slots), unless placed elsewhere
  T* gradients_ = nullptr;                   // (P + reserved slots): own_gradients_ or placed
  AlignedVector<T> buffer_values_;           // the real buffers, in layer order
  std::vector<int64_t> buffer_counters_;     // the int64 buffers, in layer order
  AlignedVector<std::byte> scratch_;         // every layer's scratch, activations included
  AlignedVector<std::byte> transient_;       // the layers' shared transient memory
  AlignedVector<T> output_;                  // (outputs, max_batch)
  AlignedVector<T> output_gradient_;         // (outputs, max_batch)
};

}  // namespace mpiddp::nn
