#pragma once
// A sequential model that owns one flat parameter buffer and one flat gradient buffer.
// Layers alias slices of both (Layer::bind), in order, with a running offset.
//
// Activation memory is sized once for max_batch samples: forward and backward only write
// into buffers made here, so a training step allocates nothing.
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

// One layer of a model description, as in the config: {"type":"linear","out":48}.
struct LayerSpec {
  std::string type;
  Index out = 0;  // linear only
};

// A named parameter tensor inside the flat buffer, with PyTorch nn.Sequential names:
// "<layer index>.weight" [out, in] and "<layer index>.bias" [out].
struct ParameterTensor {
  std::string name;
  Index offset = 0;
  std::vector<Index> shape;
  Index size() const;
};

// Flat buffers: 64-byte aligned, on huge pages from 2 MiB (Note [allocate once, keep it mapped]).
template <typename T>
using AlignedVector = std::vector<T, HugePageAllocator<T>>;

// Told during backward, layer by layer from the last, that every gradient from `offset` to
// the end of the gradient buffer is final: the gradient reducer starts its buckets then.
class GradientListener {
 public:
  virtual ~GradientListener() = default;
  virtual void gradients_ready(Index offset) = 0;
};

template <typename T>
class Sequential {
 public:
  // reserved_gradient_slots: extra elements after the P gradients, reduced together with
  // them by the trainer (see Note [the loss rides with the gradients] in train/trainer_step.cpp).
  Sequential(Index inputs, const std::vector<LayerSpec>& specs, Index max_batch,
             Index reserved_gradient_slots = 0);

  Index inputs() const { return inputs_; }
  Index outputs() const { return outputs_; }
  Index max_batch() const { return max_batch_; }
  Index parameter_count() const { return parameter_count_; }
  const std::vector<ParameterTensor>& tensors() const { return tensors_; }
  // Multiply-adds of one sample's forward pass: the sum of in x out over linear layers
  // (backward costs about twice as much).
  double multiply_adds_per_sample() const;
  // "6-linear48-tanh-linear48-tanh-linear1": identifies the architecture in hashes and logs.
  std::string describe() const;

  T* parameters() { return parameters_.data(); }
  const T* parameters() const { return parameters_.data(); }
  // P gradients followed by the reserved slots.
  T* gradients() { return gradients_; }
  const T* gradients() const { return gradients_; }

  // P + reserved slots: the length of gradients().
  Index gradient_count() const { return gradient_count_; }
  // Moves the gradient buffer, contents and all, into gradient_count() elements of memory
  // the caller owns and keeps alive as long as the model: the gradient reducer's shared
  // memory, where the ranks sum it without copying it (see GradientReducer).
  void place_gradients(T* memory);

  // Seeded initialisation, PyTorch's default scheme layer by layer.
  void initialize(uint64_t seed);
  void zero_gradients();

  // x: (inputs, B), B <= max_batch -> (outputs, B). The view stays valid until the next forward.
  ConstMatrixView<T> forward(ConstMatrixView<T> x);
  // Where the loss writes dLoss/dout: (outputs, B) for the batch of the last forward.
  MatrixView<T> output_gradient();
  // Back-propagates output_gradient() through the last forward pass and adds the parameter
  // gradients into gradients(). x must be the input of that forward pass. A listener hears
  // after each layer with parameters that its gradients (and all later ones) are final.
  void backward(ConstMatrixView<T> x, GradientListener* listener = nullptr);

 private:
  void bind_layers();

  Index inputs_, outputs_ = 0, max_batch_, parameter_count_ = 0, gradient_count_ = 0;
  Index batch_ = 0;  // batch size of the last forward
  std::vector<std::unique_ptr<Layer<T>>> layers_;
  std::vector<Index> widths_;  // output features of each layer
  std::vector<Index> parameter_offsets_;  // where each layer's parameters start
  std::vector<ParameterTensor> tensors_;
  AlignedVector<T> parameters_;                // (P)
  UntouchedZeros<T> own_gradients_;            // (P + reserved slots), unless placed elsewhere
  T* gradients_ = nullptr;                     // (P + reserved slots): own_gradients_ or placed
  std::vector<AlignedVector<T>> activations_;  // layer l: (widths_[l], max_batch)
  AlignedVector<T> delta_a_, delta_b_;         // ping-pong dLoss/d(activation)
};

}  // namespace mpiddp::nn
