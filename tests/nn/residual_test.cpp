#include "mpiddp/nn/residual.hpp"

#include <gtest/gtest.h>

#include "../support/layer_harness.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::check_layer_gradients;
using mpiddp::testing::LayerHarness;
using mpiddp::testing::specs;

TEST(Residual, HandValues) {
  // body = linear 2 -> 2 with W = [[1, 2], [0, -1]], b = [0.5, 0], then tanh... kept simple:
  // body = linear only. x = [1, -2]: W x + b = [1 - 4 + 0.5, 0 + 2 + 0] = [-2.5, 2],
  // y = x + body(x) = [-1.5, 0].
  // Backward with dy = [1, 3]: dx = dy + W^T dy = [1, 3] + [1*1 + 0*3, 2*1 - 1*3] = [2, 2];
  // dW = dy x^T = [[1, -2], [3, -6]], db = dy = [1, 3].
  auto layer = mpiddp::testing::layer<double>(
      R"({"type": "residual", "layers": [{"type": "linear", "out": 2}]})", {2});
  LayerHarness<double> h(*layer, 1);
  h.set_parameters({1, 2, 0, -1, 0.5, 0});
  const std::vector<double> x = {1, -2};
  const std::vector<double> y = h.forward(x, 1);
  EXPECT_DOUBLE_EQ(y[0], -1.5);
  EXPECT_DOUBLE_EQ(y[1], 0.0);
  const std::vector<double> dx = h.backward(x, y, {1, 3}, 1);
  EXPECT_DOUBLE_EQ(dx[0], 2.0);
  EXPECT_DOUBLE_EQ(dx[1], 2.0);
  const std::vector<double> expected = {1, -2, 3, -6, 1, 3};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_DOUBLE_EQ(h.grads[i], expected[i]) << i;
}

TEST(Residual, GradientMatchesFiniteDifferences) {
  auto layer = mpiddp::testing::layer<double>(
      R"({"type": "residual", "layers": [{"type": "linear", "out": 5}, {"type": "tanh"},
                                          {"type": "linear", "out": 4}]})", {4});
  check_layer_gradients(*layer, 3);
}

TEST(Residual, NestedResidualsGradientAndNames) {
  const auto list = specs(R"([
      {"type": "linear", "out": 4},
      {"type": "residual", "layers": [
          {"type": "gelu"},
          {"type": "residual", "layers": [{"type": "linear", "out": 4}, {"type": "sigmoid"}]},
          {"type": "linear", "out": 4}]},
      {"type": "linear", "out": 2}])");
  Model<double> model({3}, list, 4);
  EXPECT_EQ(model.describe(),
            "3-linear4-residual(gelu-residual(linear4-sigmoid)-linear4)-linear2");
  std::vector<std::string> names;
  for (const auto& t : model.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.body.1.body.0.weight",
                                             "1.body.1.body.0.bias", "1.body.2.weight",
                                             "1.body.2.bias", "2.weight", "2.bias"}));
  model.initialize(4);
  EXPECT_GT(mpiddp::testing::check_model_gradients(model, 4), 1e-3);
}

TEST(Residual, BodyThatChangesTheShapeNamesTheLayer) {
  try {
    Model<float> model({3}, specs(R"([{"type": "linear", "out": 4},
        {"type": "residual", "layers": [{"type": "linear", "out": 5}]}])"), 2);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "model.layers[1]");
    EXPECT_NE(std::string(e.what()).find("maps (4) to (5)"), std::string::npos) << e.what();
  }
}

TEST(Residual, KeysInsideTheBodyHaveTheirFullPath) {
  try {
    specs(R"([{"type": "residual", "layers": [{"type": "tanh"}, {"type": "linear", "out": 0}]}])");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "model.layers[0].layers[1].out");
  }
  try {
    specs(R"([{"type": "residual", "layers": []}])");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "model.layers[0].layers");
  }
  try {
    specs(R"([{"type": "residual", "layers": [{"type": "tanh"}], "skip": 1}])");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "model.layers[0].skip");
  }
}

}  // namespace
}  // namespace mpiddp::nn
