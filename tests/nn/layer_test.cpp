#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mpiddp/core/error.hpp"

#include "../support/layer_harness.hpp"
#include "mpiddp/nn/activation.hpp"
#include "mpiddp/nn/linear.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::check_layer_gradients;
using mpiddp::testing::LayerHarness;
using mpiddp::testing::test_values;

TEST(Linear, ForwardHandValues) {
  // W = [[1, 2], [3, 4], [5, 6]] (out 3, in 2), b = [0.5, -1, 2], x = [1, -1] and [2, 0.5]
  // y0 = W [1,-1] + b = [-1+0.5, -1-1, -1+2] = [-0.5, -2, 1]
  // y1 = W [2,0.5] + b = [3+0.5, 8-1, 13+2] = [3.5, 7, 15]
  Linear<double> layer(2, 3);
  LayerHarness<double> h(layer, 2);
  h.set_parameters({1, 2, 3, 4, 5, 6, 0.5, -1, 2});
  const std::vector<double> y = h.forward({1, -1, 2, 0.5}, 2);
  const std::vector<double> expected = {-0.5, -2, 1, 3.5, 7, 15};
  for (int i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(y[i], expected[i]) << i;
}

TEST(Linear, BackwardHandValues) {
  // One sample x = [1, 2], dy = [1, -1, 0.5], W as above.
  // dW = dy x^T = [[1, 2], [-1, -2], [0.5, 1]], db = dy, dx = W^T dy = [1-3+2.5, 2-4+3] = [0.5, 1]
  Linear<double> layer(2, 3);
  LayerHarness<double> h(layer, 1);
  h.set_parameters({1, 2, 3, 4, 5, 6, 0.5, -1, 2});
  const std::vector<double> x = {1, 2};
  const std::vector<double> dx = h.backward(x, h.forward(x, 1), {1, -1, 0.5}, 1);
  const std::vector<double> expected_grads = {1, 2, -1, -2, 0.5, 1, 1, -1, 0.5};
  for (int i = 0; i < 9; ++i) EXPECT_DOUBLE_EQ(h.grads[i], expected_grads[i]) << i;
  EXPECT_DOUBLE_EQ(dx[0], 0.5);
  EXPECT_DOUBLE_EQ(dx[1], 1.0);
}

TEST(Linear, InitialisationIsUniformInPyTorchBound) {
  Linear<double> layer(16, 8);
  LayerHarness<double> h(layer, 1);
  Rng rng(7);
  layer.initialize(rng);
  double max_abs = 0.0;
  for (double p : h.params) max_abs = std::max(max_abs, std::fabs(p));
  EXPECT_LE(max_abs, 0.25);  // 1/sqrt(16)
  EXPECT_GT(max_abs, 0.2);   // 136 draws: the largest is close to the bound
}

TEST(Linear, GradientMatchesFiniteDifferences) {
  Linear<double> layer(5, 4);
  check_layer_gradients(layer, 3);
}

class ActivationTest : public ::testing::TestWithParam<ActivationKind> {};

TEST_P(ActivationTest, GradientMatchesFiniteDifferences) {
  Activation<double> layer(GetParam(), {2, 3});
  check_layer_gradients(layer, 4);
}

INSTANTIATE_TEST_SUITE_P(All, ActivationTest,
                         ::testing::Values(ActivationKind::kTanh, ActivationKind::kRelu,
                                           ActivationKind::kSigmoid, ActivationKind::kGelu));

TEST(Activation, HandValues) {
  // tanh(0.5) = 0.46211715726000974, sigmoid(0.5) = 1/(1+e^-0.5) = 0.6224593312018546,
  // gelu(0.5) = 0.5 * 0.5 * (1 + erf(0.5/sqrt 2)) = 0.34573123063700656, relu(-0.5) = 0.
  auto apply = [](ActivationKind kind, double v) {
    Activation<double> layer(kind, {1});
    LayerHarness<double> h(layer, 1);
    return h.forward({v}, 1)[0];
  };
  EXPECT_NEAR(apply(ActivationKind::kTanh, 0.5), 0.46211715726000974, 1e-15);
  EXPECT_NEAR(apply(ActivationKind::kSigmoid, 0.5), 0.6224593312018546, 1e-15);
  EXPECT_NEAR(apply(ActivationKind::kGelu, 0.5), 0.34573123063700656, 1e-15);
  EXPECT_EQ(apply(ActivationKind::kRelu, -0.5), 0.0);
  EXPECT_EQ(apply(ActivationKind::kRelu, 1.5), 1.5);
  // gelu(-1) = -0.15865525393145707 = -Phi(-1)
  EXPECT_NEAR(apply(ActivationKind::kGelu, -1.0), -0.15865525393145707, 1e-15);
}

// Note [gelu's erf]: float32's gelu takes Eigen's vectorised erf and exp. Against float64's
// (libm's erf) on x in [-10, 10] in steps of 1/1024 (odd counts, so the vector loops' tails
// are exercised too): within 3e-7 (1 + |x|) for the value and the derivative, a few ulps of
// the result where |x| <= 1 and about one ulp of x Phi(x)'s largest term beyond.
TEST(Activation, GeluInFloat32IsWithinAFewUlpsOfFloat64) {
  const Index n = 20481;
  Activation<float> single(ActivationKind::kGelu, {n});
  Activation<double> twice(ActivationKind::kGelu, {n});
  LayerHarness<float> hf(single, 1);
  LayerHarness<double> hd(twice, 1);
  std::vector<float> xf(n), ones_f(n, 1.0f);
  std::vector<double> xd(n), ones_d(n, 1.0);
  for (Index i = 0; i < n; ++i) {
    xf[i] = static_cast<float>(static_cast<double>(i - n / 2) / 1024.0);
    xd[i] = xf[i];
  }
  const std::vector<float> yf = hf.forward(xf, 1), df = hf.backward(xf, yf, ones_f, 1);
  const std::vector<double> yd = hd.forward(xd, 1), dd = hd.backward(xd, yd, ones_d, 1);
  double worst_y = 0, worst_d = 0;
  for (Index i = 0; i < n; ++i) {
    const double bound = 3e-7 * (1 + std::abs(xd[i]));
    EXPECT_LE(std::abs(yf[i] - yd[i]), bound) << "gelu(" << xd[i] << ")";
    EXPECT_LE(std::abs(df[i] - dd[i]), bound) << "gelu'(" << xd[i] << ")";
    worst_y = std::max(worst_y, std::abs(yf[i] - yd[i]));
    worst_d = std::max(worst_d, std::abs(df[i] - dd[i]));
  }
  EXPECT_GT(worst_y, 0.0);  // float32 does round: the comparison is not of one path with itself
  EXPECT_NEAR(yf[n / 2 + 512], 0.34573123063700656, 1e-7);  // gelu(0.5)
}

TEST(Linear, NeedsAFlatInputAndNamesTheLayer) {
  try {
    mpiddp::testing::layer<float>(R"({"type": "linear", "out": 4})", {2, 3, 3});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "model.layers[0]");
    EXPECT_NE(std::string(e.what()).find("(2, 3, 3)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpiddp::nn
