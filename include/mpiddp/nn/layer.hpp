#pragma once
// The layer contract. A layer maps a batch x: (inputs, B) -> y: (outputs, B), where inputs
// and outputs are the sizes of its per-sample shapes (nn/shape.hpp), known when it is built.
//
// A layer declares what it needs and owns none of it (Note [one buffer, many views]):
//   parameters()   trained tensors, with PyTorch's name suffix and shape, in memory order;
//   buffers()      saved but untrained state (BatchNorm's running statistics);
//   scratch_bytes  memory it keeps from forward to backward, or uses inside one pass, for
//                  up to max_batch samples;
//   transient_bytes  memory it uses inside one forward call or one backward call only
//                  (Note [transient memory]).
// The model sums these up, allocates each kind once, and hands every layer its views (bind).
// A training step therefore allocates nothing.
//
// Note [transient memory]
// Scratch is the layer's own: nothing else writes it between its forward and its backward.
// Transient memory is shared: every layer of a stack gets the same region, since they run
// one at a time, and the model allocates the largest any layer asks for, once. A layer may
// write and read it freely inside one call of forward or of backward, but nothing in it
// survives the call: the layers after it (in forward) or before it (in backward) overwrite
// it in between. A recomputing residual (nn/residual.hpp) keeps its body's activations
// there: it runs the body's forward again inside its own backward instead of keeping them.
//
// Note [one buffer, many views]
// All parameters of a model live in one flat buffer and all gradients in another with the
// same layout, so the gradient reducer and the optimizer each see one span. Buffers live in
// a third (real values) and a fourth (int64 counters), so checkpoints and the broadcast of
// buffers see them whole as well; they never enter the optimizer or the gradient reduction.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/core/rng.hpp"
#include "mpiddp/core/scratch.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/nn/context.hpp"
#include "mpiddp/nn/layer_hooks.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/nn/shape.hpp"

namespace mpiddp::nn {

// A trained tensor: "weight" [out, in, kh, kw]. Nested layers prefix their children's names
// ("body.0.weight"), so the model's names are those of a PyTorch state_dict.
struct TensorSpec {
  std::string name;
  Shape shape;
};

// A named tensor inside one of the model's flat buffers, with PyTorch nn.Sequential names:
// "<layer index>.weight" [out, in], "<layer index>.bias" [out], "3.body.0.weight", ...
struct ParameterTensor {
  std::string name;
  Index offset = 0;
  std::vector<Index> shape;
  Index size() const;
};

// A tensor a layer uses without owning it: another layer's, named as in the model's
// state_dict (linear's tied_to "0.weight", the GPT's head sharing the token embedding).
// The model finds it and checks its shape; the layer's bind finds it in the model's
// tensors, and its gradients add up in the owner's place, so it is trained, reduced and
// saved as one tensor (weight files carry both names, as a PyTorch state_dict does).
struct TiedTensor {
  std::string name;    // the layer's own name for it, "weight"; its stack prefixes it
  std::string target;  // the model's tensor it is: "0.weight"
  Shape shape;         // the shape the layer needs
  std::string key;     // the config key that ties it, for messages: "model.layers[11].tied_to"
  // Where the layer's own parameters would begin in its stack's (each stack adds its
  // offset): the target must lie before, in an earlier layer, whose gradients the backward
  // pass finishes after this layer has added to them.
  Index position = 0;
};

enum class BufferType { kReal, kInt64 };

// A saved, untrained tensor: "running_mean" (real) or "num_batches_tracked" (int64, shape []).
struct BufferSpec {
  std::string name;
  Shape shape;
  BufferType type = BufferType::kReal;
};

// The views a layer gets from its model.
template <typename T>
struct LayerMemory {
  T* parameters = nullptr;   // the sizes of parameters(), in order
  T* gradients = nullptr;    // the same layout as parameters
  T* buffers = nullptr;      // the real buffers(), in order
  int64_t* counters = nullptr;  // the int64 buffers(), in order
  std::byte* scratch = nullptr; // scratch_bytes(max_batch), 64-byte aligned
  // transient_bytes(max_batch), 64-byte aligned, shared with the stack's other layers
  // (Note [transient memory]).
  std::byte* transient = nullptr;
  Index max_batch = 0;
  // The whole model's tensors and buffers, where a layer finds the tensors it is tied to.
  const std::vector<ParameterTensor>* model_tensors = nullptr;
  // (model tensors) where each tensor's values lie: at its offset in the model's parameter
  // buffer, or, with the parameters gathered by unit (Model::keep_parameter_part), in its unit's.
  const std::vector<T*>* tensor_parameters = nullptr;
  // (model tensors) where each tensor's gradient lies: at its offset in the model's gradient
  // buffer, or, with the gradients staged by unit (Model::bind_unit_gradients), in its unit's.
  const std::vector<T*>* tensor_gradients = nullptr;
};

template <typename T>
class Layer {
 public:
  virtual ~Layer() = default;

  // The config's type name: "linear", "conv2d", ...
  virtual std::string type() const = 0;
  // This layer in the model's description ("linear48", "conv2d16k3s1p1"): everything that
  // decides its tensors' shapes, so that two models with the same description fit the same files.
  virtual std::string describe() const { return type(); }

  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return output_shape_; }
  // Values per sample; kept, since the passes' inner loops ask for them.
  Index inputs() const { return inputs_; }
  Index outputs() const { return outputs_; }

  virtual std::vector<TensorSpec> parameters() const { return {}; }
  virtual std::vector<BufferSpec> buffers() const { return {}; }
  // The tensors it uses but does not own (TiedTensor); their sizes are not in parameters().
  virtual std::vector<TiedTensor> tied_tensors() const { return {}; }
  virtual size_t scratch_bytes(Index /*max_batch*/) const { return 0; }
  // Memory used within one forward call or one backward call, not kept between them
  // (Note [transient memory]).
  virtual size_t transient_bytes(Index /*max_batch*/) const { return 0; }
  // Multiply-adds of one sample's forward pass (backward costs about twice as much): the
  // thread choice and the benchmarks' FLOP figures come from it.
  virtual double multiply_adds_per_sample() const { return 0.0; }
  // The matrix products of one forward and backward pass over `batch` samples, appended to
  // `calls`: compute.gemm=auto times the libraries on them (kernels/gemm_calibration.hpp).
  virtual void gemm_calls(Index /*batch*/, std::vector<kernels::GemmCall>& /*calls*/) const {}

  // The sum of the parameters' sizes.
  Index parameter_count() const;

  // A setup check, before any pass: `smallest` is the fewest samples a training pass will
  // take statistics over (the global micro-batch when they are reduced across ranks, the
  // rank's own otherwise). BatchNorm refuses one value per channel, as PyTorch does, with a
  // ConfigError naming the layer; most layers accept anything.
  virtual void check_training_batch(Index /*smallest*/) const {}

  // Whether the layer can take a chunked pass (deterministic mode's) with chunks of `chunk`
  // samples side by side: its forward and its input gradient give every sample's column the
  // same bits whatever the batch's width and the column's place in it (elementwise arithmetic
  // without a transcendental function, whose vectorised and scalar forms round apart, or a
  // GEMM whose column order does not reach a column's sums), keeping to the context's product
  // widths, and its backward hands its parameter gradients to the context's
  // parameter_gradients destination. False unless the layer says so: such a model's
  // deterministic step goes chunk by chunk instead.
  virtual bool supports_chunked_pass(Index /*chunk*/) const { return false; }
  // Whether a second forward of the same input and context, before the backward, writes the
  // same bits and leaves the layer as one forward would: what a recomputing residual needs
  // of its body. True unless the layer says otherwise: BatchNorm's training forward moves
  // its running statistics (and sums statistics over the ranks), so a second one would move
  // them again. A layer that draws from a generator's state, not from the pass's counters
  // as dropout does (nn/dropout_mask.hpp), must say false as well.
  virtual bool can_run_forward_twice() const { return true; }
  // Whether backward honours PassContext::overwrite_gradients: when it is set, every one of
  // the layer's parameter gradients is written, not added to. False unless the layer says
  // so: the step then clears the layer's gradients before the pass, as it always did.
  virtual bool can_overwrite_gradients() const { return false; }

  // A layer that holds layers (a residual's body) tells them of the hooks (nn/layer_hooks.hpp):
  // its own key prefix ("3.") and its first parameter in the model's buffer; the hooks outlive
  // the layer's passes. Others hold no units.
  virtual void install_hooks(LayerHooks* /*hooks*/, const std::string& /*prefix*/, Index /*first_parameter*/,
                             int /*depth*/) {}
  virtual void bind(const LayerMemory<T>& /*memory*/) {}
  // PyTorch's default initialisation of the parameters, and the buffers' initial values.
  virtual void initialize(Rng& /*rng*/) {}

  // x: (inputs, B) -> y: (outputs, B), B <= max_batch.
  virtual void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) = 0;
  // Given x, y = forward(x) of the same context, and dy = dLoss/dy: adds dLoss/dparameters
  // into the bound gradients (writes them, with context.overwrite_gradients) and, when dx is
  // not null, writes dLoss/dx: (inputs, B). The first layer of a model gets null: nobody
  // needs the gradient of the input data.
  virtual void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                        ConstMatrixView<T> dy, MatrixView<T>* dx) = 0;

 protected:
  Layer(Shape input, Shape output)
      : input_shape_(std::move(input)),
        output_shape_(std::move(output)),
        inputs_(shape_size(input_shape_)),
        outputs_(shape_size(output_shape_)) {}

 private:
  Shape input_shape_, output_shape_;
  Index inputs_, outputs_;
};

// Every layer lays out its scratch in 64-byte pieces: align_scratch, scratch_values_bytes and
// take_scratch_values (core/scratch.hpp).

}  // namespace mpiddp::nn
