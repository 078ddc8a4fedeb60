#pragma once
// swish: y = x * sigmoid(beta * x), elementwise, any shape to the same shape (Ramachandran et
// al., 2017; PyTorch's nn.SiLU is beta = 1). beta is a fixed config option, not trained:
//   {"type": "swish"}  or  {"type": "swish", "beta": 2.0}
#include <mpiddp/io/json_reader.hpp>
#include <mpiddp/nn/layer.hpp>
#include <mpiddp/nn/layer_registry.hpp>

#include <string>

namespace swish_example {

struct SwishOptions {
  double beta = 1.0;  // in (0, 100]
  static SwishOptions parse(mpiddp::io::JsonSection& section);
};

template <typename T>
class Swish final : public mpiddp::nn::Layer<T> {
 public:
  Swish(const SwishOptions& options, const mpiddp::nn::Shape& input, const std::string& key);

  std::string type() const override { return "swish"; }
  // One exp, a division and three products per value: about as much as a multiply-add or two.
  double multiply_adds_per_sample() const override { return 2.0 * static_cast<double>(this->inputs()); }
  // x: (F, B) -> y: (F, B)
  void forward(const mpiddp::nn::PassContext& context, mpiddp::ConstMatrixView<T> x,
               mpiddp::MatrixView<T> y) override;
  // dx = dy * (s + beta * x * s * (1 - s)), s = sigmoid(beta * x): (F, B)
  void backward(const mpiddp::nn::PassContext& context, mpiddp::ConstMatrixView<T> x,
                mpiddp::ConstMatrixView<T> y, mpiddp::ConstMatrixView<T> dy,
                mpiddp::MatrixView<T>* dx) override;

 private:
  T beta_;
};

// The registry entry: register it (mpiddp::nn::register_layer_type) before a config is parsed.
mpiddp::nn::LayerType swish_layer_type();

}  // namespace swish_example
