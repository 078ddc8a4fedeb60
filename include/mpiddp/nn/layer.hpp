#pragma once
// The layer interface. A layer maps x: (F, B) -> y: (O, B) (see core/types.hpp).
//
// Parameters and their gradients are not owned by the layer: the model hands each layer a
// view into its one flat parameter buffer and its one flat gradient buffer (bind), so the
// gradient reducer and the optimizer can work on the whole model as a single span.
#include <memory>
#include <string>

#include "mpiddp/core/rng.hpp"
#include "mpiddp/core/types.hpp"

namespace mpiddp::nn {

template <typename T>
class Layer {
 public:
  virtual ~Layer() = default;

  // "linear", "tanh", ...: the config's type name.
  virtual std::string type() const = 0;
  // Output features for the given input features.
  virtual Index outputs(Index inputs) const = 0;
  virtual Index parameter_count() const { return 0; }
  // params and grads point at parameter_count() elements of the model's flat buffers.
  virtual void bind(T* /*params*/, T* /*grads*/) {}
  virtual void initialize(Rng& /*rng*/) {}

  // x: (F, B) -> y: (O, B)
  virtual void forward(ConstMatrixView<T> x, MatrixView<T> y) const = 0;
  // Given x, y = forward(x) and dy = dLoss/dy: adds dLoss/dparams into the bound gradient
  // buffer and, when dx is not null, writes dLoss/dx: (F, B) into it. The first layer
  // passes null: nobody needs the gradient of the input data.
  virtual void backward(ConstMatrixView<T> x, ConstMatrixView<T> y, ConstMatrixView<T> dy,
                        MatrixView<T>* dx) = 0;
};

}  // namespace mpiddp::nn
