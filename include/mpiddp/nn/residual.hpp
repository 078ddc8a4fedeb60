#pragma once
// y = x + body(x), body a chain of layers that keeps the shape (ResNet's identity shortcut).
// Its tensors are the body's behind "body.": "3.body.0.weight", as a PyTorch module
//   class Residual(nn.Module):
//       def __init__(self, *layers): super().__init__(); self.body = nn.Sequential(*layers)
//       def forward(self, x): return x + self.body(x)
// names them in its state_dict (docs/interchange.md).
//
// With "recompute" it keeps nothing between forward and backward: its body's activations
// live in transient memory (Note [transient memory] in nn/layer.hpp), and backward runs the
// body's forward again, with the same context, before the body's backward. The body's
// layers must give the same bits a second time (Layer::can_run_forward_twice): dropout's
// masks are counters of the pass, so they do; BatchNorm's training forward is refused.
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/sequential.hpp"

namespace mpiddp::nn {

struct ResidualOptions {
  std::vector<LayerSpec> body;  // "layers": parsed like the model's own list
  bool recompute = false;       // "recompute": the body's forward again in backward
  static ResidualOptions parse(io::JsonSection& section);
};

// A resolved layer list (a config's model.layers) without the residuals' "recompute",
// nested ones included. Recomputing changes what a step keeps in memory, not one bit it
// computes, so a checkpoint resumes with it switched either way.
io::Json without_recompute(io::Json layers);

template <typename T>
class Residual final : public Layer<T> {
 public:
  Residual(const ResidualOptions& options, const Shape& input, const std::string& key);

  std::string type() const override { return "residual"; }
  // "residual(conv2d8k3s1p1-relu)"
  std::string describe() const override { return "residual(" + body_.describe() + ")"; }
  std::vector<TensorSpec> parameters() const override;
  std::vector<BufferSpec> buffers() const override;
  std::vector<TiedTensor> tied_tensors() const override;
  size_t scratch_bytes(Index max_batch) const override;
  size_t transient_bytes(Index max_batch) const override;
  bool can_run_forward_twice() const override { return body_.can_run_forward_twice(); }
  double multiply_adds_per_sample() const override { return body_.multiply_adds_per_sample(); }
  void gemm_calls(Index batch, std::vector<kernels::GemmCall>& calls) const override { body_.gemm_calls(batch, calls); }
  void check_training_batch(Index smallest) const override { body_.check_training_batch(smallest); }
  bool can_overwrite_gradients() const override { return body_.can_overwrite_gradients(); }
  void bind(const LayerMemory<T>& memory) override;
  // Its body's layers are units too, keyed "<its key>.body.<l>".
  void install_hooks(LayerHooks* hooks, const std::string& prefix, Index first_parameter, int depth) override {
    body_.install_hooks(hooks, prefix + "body.", first_parameter, depth);
  }
  void initialize(Rng& rng) override { body_.initialize(rng); }
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

 private:
  // The bytes of body_out_, then the body's scratch: in scratch, or in transient memory
  // when recomputing.
  size_t kept_bytes(Index max_batch) const;

  Sequential<T> body_;
  bool recompute_ = false;
  T* body_out_ = nullptr;  // body(x): (outputs, max_batch), kept for backward unless recomputing
};

}  // namespace mpiddp::nn
