#include <gtest/gtest.h>

#include <cmath>

#include "../support/gradient_check.hpp"
#include "mpiddp/nn/activation.hpp"
#include "mpiddp/nn/linear.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::expect_gradient_matches;
using mpiddp::testing::test_values;

TEST(Linear, ForwardHandValues) {
  // W = [[1, 2], [3, 4], [5, 6]] (out 3, in 2), b = [0.5, -1, 2], x = [1, -1] and [2, 0.5]
  // y0 = W [1,-1] + b = [-1+0.5, -1-1, -1+2] = [-0.5, -2, 1]
  // y1 = W [2,0.5] + b = [3+0.5, 8-1, 13+2] = [3.5, 7, 15]
  Linear<double> layer(2, 3);
  std::vector<double> params = {1, 2, 3, 4, 5, 6, 0.5, -1, 2}, grads(9, 0.0);
  layer.bind(params.data(), grads.data());
  std::vector<double> x = {1, -1, 2, 0.5}, y(6);
  layer.forward(ConstMatrixView<double>(x.data(), 2, 2), MatrixView<double>(y.data(), 3, 2));
  const std::vector<double> expected = {-0.5, -2, 1, 3.5, 7, 15};
  for (int i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(y[i], expected[i]) << i;
}

TEST(Linear, BackwardHandValues) {
  // One sample x = [1, 2], dy = [1, -1, 0.5], W as above.
  // dW = dy x^T = [[1, 2], [-1, -2], [0.5, 1]], db = dy, dx = W^T dy = [1-3+2.5, 2-4+3] = [0.5, 1]
  Linear<double> layer(2, 3);
  std::vector<double> params = {1, 2, 3, 4, 5, 6, 0.5, -1, 2}, grads(9, 0.0);
  layer.bind(params.data(), grads.data());
  std::vector<double> x = {1, 2}, y(3), dy = {1, -1, 0.5}, dx(2);
  MatrixView<double> dx_view(dx.data(), 2, 1);
  layer.forward(ConstMatrixView<double>(x.data(), 2, 1), MatrixView<double>(y.data(), 3, 1));
  layer.backward(ConstMatrixView<double>(x.data(), 2, 1), ConstMatrixView<double>(y.data(), 3, 1),
                 ConstMatrixView<double>(dy.data(), 3, 1), &dx_view);
  const std::vector<double> expected_grads = {1, 2, -1, -2, 0.5, 1, 1, -1, 0.5};
  for (int i = 0; i < 9; ++i) EXPECT_DOUBLE_EQ(grads[i], expected_grads[i]) << i;
  EXPECT_DOUBLE_EQ(dx[0], 0.5);
  EXPECT_DOUBLE_EQ(dx[1], 1.0);
}

TEST(Linear, InitialisationIsUniformInPyTorchBound) {
  Linear<double> layer(16, 8);
  std::vector<double> params(layer.parameter_count()), grads(params.size());
  layer.bind(params.data(), grads.data());
  Rng rng(7);
  layer.initialize(rng);
  double max_abs = 0.0;
  for (double p : params) max_abs = std::max(max_abs, std::fabs(p));
  EXPECT_LE(max_abs, 0.25);  // 1/sqrt(16)
  EXPECT_GT(max_abs, 0.2);   // 136 draws: the largest is close to the bound
}

// Checks a layer's backward against central differences of L = sum(y .* r).
void check_layer_gradients(Layer<double>& layer, Index inputs, Index batch) {
  const Index outputs = layer.outputs(inputs);
  std::vector<double> params = test_values(layer.parameter_count(), 1);
  std::vector<double> grads(params.size(), 0.0);
  layer.bind(params.data(), grads.data());
  std::vector<double> x = test_values(inputs * batch, 2), r = test_values(outputs * batch, 3);
  for (auto& v : x) v *= 2.0;  // cover both sides of relu's and gelu's kinks
  std::vector<double> y(outputs * batch), dx(inputs * batch);
  auto loss = [&] {
    layer.forward(ConstMatrixView<double>(x.data(), inputs, batch),
                  MatrixView<double>(y.data(), outputs, batch));
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * r[i];
    return l;
  };
  loss();
  MatrixView<double> dx_view(dx.data(), inputs, batch);
  layer.backward(ConstMatrixView<double>(x.data(), inputs, batch),
                 ConstMatrixView<double>(y.data(), outputs, batch),
                 ConstMatrixView<double>(r.data(), outputs, batch), &dx_view);
  const std::vector<double> analytic_params = grads, analytic_x = dx;
  expect_gradient_matches(loss, x.data(), static_cast<long>(x.size()), analytic_x.data(), "dx");
  if (!params.empty())
    expect_gradient_matches(loss, params.data(), static_cast<long>(params.size()),
                            analytic_params.data(), "dparams");
}

TEST(Linear, GradientMatchesFiniteDifferences) {
  Linear<double> layer(5, 4);
  check_layer_gradients(layer, 5, 3);
}

class ActivationTest : public ::testing::TestWithParam<ActivationKind> {};

TEST_P(ActivationTest, GradientMatchesFiniteDifferences) {
  Activation<double> layer(GetParam());
  check_layer_gradients(layer, 6, 4);
}

INSTANTIATE_TEST_SUITE_P(All, ActivationTest,
                         ::testing::Values(ActivationKind::kTanh, ActivationKind::kRelu,
                                           ActivationKind::kSigmoid, ActivationKind::kGelu));

TEST(Activation, HandValues) {
  // tanh(0.5) = 0.46211715726000974, sigmoid(0.5) = 1/(1+e^-0.5) = 0.6224593312018546,
  // gelu(0.5) = 0.5 * 0.5 * (1 + erf(0.5/sqrt 2)) = 0.34573123063700656, relu(-0.5) = 0.
  auto apply = [](ActivationKind kind, double v) {
    Activation<double> layer(kind);
    double y = 0;
    layer.forward(ConstMatrixView<double>(&v, 1, 1), MatrixView<double>(&y, 1, 1));
    return y;
  };
  EXPECT_NEAR(apply(ActivationKind::kTanh, 0.5), 0.46211715726000974, 1e-15);
  EXPECT_NEAR(apply(ActivationKind::kSigmoid, 0.5), 0.6224593312018546, 1e-15);
  EXPECT_NEAR(apply(ActivationKind::kGelu, 0.5), 0.34573123063700656, 1e-15);
  EXPECT_EQ(apply(ActivationKind::kRelu, -0.5), 0.0);
  EXPECT_EQ(apply(ActivationKind::kRelu, 1.5), 1.5);
  // gelu(-1) = -0.15865525393145707 = -Phi(-1)
  EXPECT_NEAR(apply(ActivationKind::kGelu, -1.0), -0.15865525393145707, 1e-15);
}

}  // namespace
}  // namespace mpiddp::nn
