#pragma once
// One layer with memory of its own, as a model would bind it, for layer tests: hand values
// through forward and backward, and finite-difference checks of every gradient.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "gradient_check.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/layer.hpp"
#include "mpiddp/nn/layer_registry.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model.hpp"

namespace mpiddp::testing {

// Layer specs from JSON text, as the config's model.layers: specs(R"([{"type":"relu"}])").
inline std::vector<nn::LayerSpec> specs(const char* json) {
  return nn::parse_layer_list(io::Json::parse(json));
}

// One layer from JSON text for an input shape: layer<double>(R"({"type":"conv2d",...})", {1, 5, 5}).
template <typename T>
std::unique_ptr<nn::Layer<T>> layer(const char* json, const nn::Shape& input) {
  const auto list = nn::parse_layer_list(io::Json::array({io::Json::parse(json)}));
  return nn::build_layer<T>(list[0], input);
}

template <typename T>
class LayerHarness {
 public:
  LayerHarness(nn::Layer<T>& layer, Index max_batch) : layer_(layer) {
    params.assign(static_cast<size_t>(layer.parameter_count()), T(0));
    grads.assign(params.size(), T(0));
    Index values = 0, counts = 0;
    for (const auto& b : layer.buffers())
      (b.type == nn::BufferType::kReal ? values : counts) += nn::shape_size(b.shape);
    buffers.assign(static_cast<size_t>(values), T(0));
    counters.assign(static_cast<size_t>(counts), 0);
    scratch_.assign(layer.scratch_bytes(max_batch), std::byte{0});
    transient_.assign(layer.transient_bytes(max_batch), std::byte{0});
    nn::LayerMemory<T> memory;
    memory.parameters = params.data();
    memory.gradients = grads.data();
    memory.buffers = buffers.data();
    memory.counters = counters.data();
    memory.scratch = scratch_.data();
    memory.transient = transient_.data();
    memory.max_batch = max_batch;
    layer.bind(memory);
  }

  // x: (inputs, batch) -> y: (outputs, batch)
  std::vector<T> forward(const std::vector<T>& x, Index batch, const nn::PassContext& context = {}) {
    std::vector<T> y(static_cast<size_t>(layer_.outputs() * batch));
    layer_.forward(context, ConstMatrixView<T>(x.data(), layer_.inputs(), batch),
                   MatrixView<T>(y.data(), layer_.outputs(), batch));
    return y;
  }
  // Returns dx: (inputs, batch); the parameter gradients are added into grads.
  std::vector<T> backward(const std::vector<T>& x, const std::vector<T>& y,
                          const std::vector<T>& dy, Index batch,
                          const nn::PassContext& context = {}) {
    std::vector<T> dx(static_cast<size_t>(layer_.inputs() * batch));
    MatrixView<T> dx_view(dx.data(), layer_.inputs(), batch);
    layer_.backward(context, ConstMatrixView<T>(x.data(), layer_.inputs(), batch),
                    ConstMatrixView<T>(y.data(), layer_.outputs(), batch),
                    ConstMatrixView<T>(dy.data(), layer_.outputs(), batch), &dx_view);
    return dx;
  }

  // Fills the transient memory with NaN bytes, as the layers after this one overwrite it
  // between its forward and its backward (Note [transient memory] in nn/layer.hpp).
  void clobber_transient() { std::fill(transient_.begin(), transient_.end(), std::byte{0xff}); }

  // Copies values into the bound parameters (their count must match).
  void set_parameters(const std::vector<T>& values) {
    EXPECT_EQ(values.size(), params.size());
    std::copy(values.begin(), values.end(), params.begin());
  }

  std::vector<T> params, grads, buffers;  // bound: write into them, never assign new ones
  std::vector<int64_t> counters;

 private:
  nn::Layer<T>& layer_;
  nn::AlignedVector<std::byte> scratch_, transient_;
};

// Checks a layer's backward against central differences of L = sum(y .* r), for its input
// and (when it has any) its parameters, in float64. Parameters start as test values in
// [-1, 1); prepare may then change them (BatchNorm's scale away from 0, say). Inputs are
// test values times input_scale. The memory stays bound: write into the vectors, never
// assign new ones.
inline void check_layer_gradients(nn::Layer<double>& layer, Index batch,
                                  const nn::PassContext& context = {}, double input_scale = 2.0,
                                  const std::function<void(LayerHarness<double>&)>& prepare = {}) {
  LayerHarness<double> h(layer, batch);
  const std::vector<double> start = test_values(static_cast<long>(h.params.size()), 1);
  std::copy(start.begin(), start.end(), h.params.begin());
  if (prepare) prepare(h);
  std::vector<double> x = test_values(layer.inputs() * batch, 2);
  const std::vector<double> r = test_values(layer.outputs() * batch, 3);
  for (auto& v : x) v *= input_scale;
  auto loss = [&] {
    const auto y = h.forward(x, batch, context);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * r[i];
    return l;
  };
  const auto y = h.forward(x, batch, context);
  std::fill(h.grads.begin(), h.grads.end(), 0.0);
  const std::vector<double> analytic_x = h.backward(x, y, r, batch, context);
  const std::vector<double> analytic_params = h.grads;
  expect_gradient_matches(loss, x.data(), static_cast<long>(x.size()), analytic_x.data(), "dx");
  if (!h.params.empty())
    expect_gradient_matches(loss, h.params.data(), static_cast<long>(h.params.size()),
                            analytic_params.data(), "dparams");
}

// Checks a whole model's parameter gradients against central differences of its mse loss on
// test inputs and targets, for the given pass context (positions, step: dropout's masks stay
// fixed), in float64. `after_backward` sees the model right after the analytic backward
// (e.g. to check the buffers a training pass moved). Returns the largest |gradient|, so a
// caller can check the comparison was not vacuous.
inline double check_model_gradients(nn::Model<double>& model, Index batch,
                                    const nn::PassContext& context = {},
                                    const std::function<void()>& after_backward = {}) {
  const Index inputs = model.inputs(), outputs = model.outputs();
  nn::MseLoss<double> mse;
  const std::vector<double> x = test_values(inputs * batch, 1), t = test_values(outputs * batch, 2);
  const ConstMatrixView<double> x_view(x.data(), inputs, batch);
  std::vector<double> scratch(static_cast<size_t>(outputs * batch));
  auto loss = [&] {
    return mse.forward_backward(model.forward(context, x_view), {t.data(), nullptr},
                                MatrixView<double>(scratch.data(), outputs, batch));
  };
  model.zero_gradients();
  // Forward first, in a statement of its own: output_gradient() is sized by the last forward.
  const auto out = model.forward(context, x_view);
  mse.forward_backward(out, {t.data(), nullptr}, model.output_gradient());
  model.backward(context, x_view);
  if (after_backward) after_backward();
  const std::vector<double> analytic(model.gradients(), model.gradients() + model.parameter_count());
  expect_gradient_matches(loss, model.parameters(), static_cast<long>(model.parameter_count()),
                          analytic.data(), "dparams");
  double largest = 0.0;
  for (double g : analytic) largest = std::max(largest, std::fabs(g));
  return largest;
}

// Element-wise equality of two vectors of doubles, naming `what` and the index.
inline void expect_values(const std::vector<double>& actual, const std::vector<double>& expected,
                          const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_DOUBLE_EQ(actual[i], expected[i]) << what << "[" << i << "]";
}

// A training pass's context for the random layers (dropout, attention's dropout): the run seed,
// the epoch, the step and the batch's global positions (null: column j at position j).
inline nn::PassContext random_pass_context(uint64_t seed = 42, int64_t epoch = 2, int64_t step = 17,
                                           const Index* positions = nullptr) {
  nn::PassContext context;
  context.seed = seed;
  context.epoch = epoch;
  context.step = step;
  context.positions = positions;
  return context;
}

}  // namespace mpiddp::testing
