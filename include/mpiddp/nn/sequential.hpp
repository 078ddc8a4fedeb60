#pragma once
// A chain of layers, each fed by the one before: the model's body, and a residual's body.
// It is a layer itself: its parameters, buffers and scratch are its layers' in order (names
// prefixed "<index>."), and its scratch also holds the activations between its layers and
// the two ping-pong buffers of backward. Its layers run one at a time, so they share one
// transient region, the largest any of them asks for (Note [transient memory] in layer.hpp).
#include <memory>
#include <utility>
#include <vector>

#include "mpiddp/nn/batch_input.hpp"
#include "mpiddp/nn/layer.hpp"
#include "mpiddp/nn/layer_registry.hpp"

namespace mpiddp::nn {

// Told during backward, layer by layer from the last, that every gradient from `offset` to
// the end of the gradient buffer is final: the gradient reducer starts its buckets then.
class GradientListener {
 public:
  virtual ~GradientListener() = default;
  virtual void gradients_ready(Index offset) = 0;
};

template <typename T>
class Sequential final : public Layer<T> {
 public:
  // Builds specs in order from the input shape; a ConfigError names the layer that does not fit.
  Sequential(const std::vector<LayerSpec>& specs, const Shape& input);

  std::string type() const override { return "stack"; }
  // "linear48-tanh-linear1"
  std::string describe() const override;
  std::vector<TensorSpec> parameters() const override;
  std::vector<BufferSpec> buffers() const override;
  std::vector<TiedTensor> tied_tensors() const override;
  // These parameter ranges (of the stack's) have another writer besides their owner, a
  // layer tied to them: the layers holding them add their gradients, never overwrite them.
  void share_gradients(const std::vector<std::pair<Index, Index>>& ranges);
  size_t scratch_bytes(Index max_batch) const override;
  size_t transient_bytes(Index max_batch) const override;
  double multiply_adds_per_sample() const override;
  void gemm_calls(Index batch, std::vector<kernels::GemmCall>& calls) const override {
    for (const auto& layer : layers_) layer->gemm_calls(batch, calls);
  }
  void check_training_batch(Index smallest) const override {
    for (const auto& layer : layers_) layer->check_training_batch(smallest);
  }
  bool supports_chunked_pass(Index chunk) const override;
  bool can_run_forward_twice() const override;
  // Every layer with parameters does: the others' gradients would need clearing first.
  bool can_overwrite_gradients() const override;
  // The stack's parameter ranges [first, end) that a pass with overwrite_gradients adds to,
  // so must be cleared before it: those of the layers that cannot overwrite.
  std::vector<std::pair<Index, Index>> gradients_added_to() const;
  void bind(const LayerMemory<T>& memory) override;
  // bind, but (where given) layer l's parameters at (*layer_parameters)[l] and its gradients
  // at (*layer_gradients)[l] (its parameters' count of values each; null for a layer without
  // parameters) rather than at memory.parameters and memory.gradients plus its offset: the
  // gradients staged by unit (Model::bind_unit_gradients), the parameters gathered by unit
  // (Model::bind_unit_parameters).
  void bind_units(const LayerMemory<T>& memory, const std::vector<T*>* layer_parameters,
                  const std::vector<T*>* layer_gradients);
  // Layer l's parameters are [offsets[l], offsets[l + 1]) of the stack's: (size() + 1).
  const std::vector<Index>& layer_parameter_offsets() const { return parameter_offsets_; }
  // Calls hooks around each of its layers' passes from now on, and tells its layers that hold
  // layers (nn/layer_hooks.hpp). prefix: its layers' keys' ("" for the model's, "3.body.");
  // first_parameter: its own first parameter in the model's buffer. Null removes them.
  void install_hooks(LayerHooks* hooks, const std::string& prefix, Index first_parameter, int depth) override;
  void initialize(Rng& rng) override;
  // Layer l's initialisation alone: initialize() is initialize_layer(0 .. size() - 1, rng).
  void initialize_layer(size_t l, Rng& rng) { layers_[l]->initialize(rng); }
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;
  // Whether the first layer takes token ids (embedding): then x below holds ids.
  bool takes_token_ids() const { return token_input_ != nullptr; }
  // x: values, or token ids when takes_token_ids().
  void forward(const PassContext& context, const BatchInput<T>& x, MatrixView<T> y);
  // backward, telling the listener after each layer with parameters where its parameters
  // begin, counted from the first parameter of this stack.
  void backward(const PassContext& context, const BatchInput<T>& x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx, GradientListener* listener);

  size_t size() const { return layers_.size(); }
  const Layer<T>& layer(size_t i) const { return *layers_[i]; }

 private:
  using Chain = std::vector<std::unique_ptr<Layer<T>>>;
  Sequential(Chain layers, const Shape& input);
  static Chain build_chain(const std::vector<LayerSpec>& specs, const Shape& input);

  // bind's work; layer_parameters (layer_gradients) null: every layer's parameters (gradients)
  // at memory.parameters (memory.gradients) + its offset.
  void bind_layers(const LayerMemory<T>& memory, const std::vector<T*>* layer_parameters,
                   const std::vector<T*>* layer_gradients);
  // Layer l has parameters and only adds to their gradients.
  bool adds_to_gradients(size_t l) const;
  // Layer l overwrites its gradients when the pass says so.
  bool overwrites_gradients(size_t l) const { return layers_[l]->can_overwrite_gradients() && !shared_[l]; }

  Chain layers_;
  TakesTokenIds<T>* token_input_ = nullptr;  // the first layer, when it takes token ids
  std::vector<Index> parameter_offsets_;  // layer l: [l], [l+1]) of the stack's parameters
  std::vector<char> shared_;              // layer l holds gradients a tied layer adds to
  LayerHooks* hooks_ = nullptr;
  std::vector<LayerUnit> units_;          // layer l as the hooks see it
  Index max_batch_ = 0;
  std::vector<T*> activations_;  // layer l < last: (outputs of l, max_batch), in scratch
  T* delta_a_ = nullptr;         // ping-pong dLoss/d(activation), (widest, max_batch) each
  T* delta_b_ = nullptr;
};

}  // namespace mpiddp::nn
