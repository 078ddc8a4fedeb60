#pragma once
// y = x + body(x), body a chain of layers that keeps the shape (ResNet's identity shortcut).
// Its tensors are the body's behind "body.": "3.body.0.weight", as a PyTorch module
//   class Residual(nn.Module):
//       def __init__(self, *layers): super().__init__(); self.body = nn.Sequential(*layers)
//       def forward(self, x): return x + self.body(x)
// names them in its state_dict (docs/interchange.md).
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/sequential.hpp"

namespace mpiddp::nn {

struct ResidualOptions {
  std::vector<LayerSpec> body;  // "layers": parsed like the model's own list
  static ResidualOptions parse(io::JsonSection& section);
};

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
  double multiply_adds_per_sample() const override { return body_.multiply_adds_per_sample(); }
  void gemm_calls(Index batch, std::vector<kernels::GemmCall>& calls) const override { body_.gemm_calls(batch, calls); }
  void check_training_batch(Index smallest) const override { body_.check_training_batch(smallest); }
  bool can_overwrite_gradients() const override { return body_.can_overwrite_gradients(); }
  void bind(const LayerMemory<T>& memory) override;
  void initialize(Rng& rng) override { body_.initialize(rng); }
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

 private:
  Sequential<T> body_;
  T* body_out_ = nullptr;  // body(x): (outputs, max_batch), kept for backward
};

}  // namespace mpiddp::nn
