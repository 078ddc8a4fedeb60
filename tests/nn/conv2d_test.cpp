#include "mpiddp/nn/conv2d.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "../support/config_errors.hpp"
#include "../support/layer_harness.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::test::config_error_key;
using mpiddp::testing::check_layer_gradients;
using mpiddp::testing::expect_gradient_matches;
using mpiddp::testing::expect_values;
using mpiddp::testing::LayerHarness;
using mpiddp::testing::test_values;

std::unique_ptr<Layer<double>> conv(const char* json, const Shape& input) {
  return mpiddp::testing::layer<double>(json, input);
}

TEST(Conv2d, ForwardHandValues) {
  // x (1, 3, 3) = [[1, 2, 0], [3, -1, 4], [0, 5, 2]], two 2x2 kernels, stride 1, no padding:
  // channel 0: w = [[1, 2], [3, 4]], b = 0
  //   (0,0): 1*1 + 2*2 + 3*3 + 4*(-1) = 10     (0,1): 1*2 + 2*0 + 3*(-1) + 4*4 = 15
  //   (1,0): 1*3 + 2*(-1) + 3*0 + 4*5 = 21     (1,1): 1*(-1) + 2*4 + 3*5 + 4*2 = 30
  // channel 1: w = [[0, 1], [-1, 0]], b = 10, so y = x[oh][ow+1] - x[oh+1][ow] + 10
  //   (0,0): 2 - 3 + 10 = 9   (0,1): 0 + 1 + 10 = 11   (1,0): -1 - 0 + 10 = 9   (1,1): 4 - 5 + 10 =
  //   9
  auto layer = conv(R"({"type": "conv2d", "out": 2, "kernel": 2})", {1, 3, 3});
  EXPECT_EQ(layer->output_shape(), (Shape{2, 2, 2}));
  LayerHarness<double> h(*layer, 1);
  h.set_parameters({1, 2, 3, 4, 0, 1, -1, 0, 0, 10});
  expect_values(h.forward({1, 2, 0, 3, -1, 4, 0, 5, 2}, 1), {10, 15, 21, 30, 9, 11, 9, 9}, "y");
}

TEST(Conv2d, StridePaddingHandValues) {
  // x (1, 3, 3) = 1..9, one 3x3 kernel of ones, stride 2, padding 1: Ho = (3 + 2 - 3) / 2 + 1 = 2.
  // Each output is the sum of the 3x3 window around (2 oh, 2 ow), the padding counting 0:
  //   (0,0): 1+2+4+5 = 12   (0,1): 2+3+5+6 = 16   (1,0): 4+5+7+8 = 24   (1,1): 5+6+8+9 = 28
  // Backward with dy = [1, 0, 0, 2]: output (0,0) reads x[0..1][0..1], output (1,1) x[1..2][1..2]:
  //   dx = [[1, 1, 0], [1, 1+2, 2], [0, 2, 2]]
  //   dW[i][j] = x_padded[i-1][j-1] + 2 x_padded[i+1][j+1]
  //            = [[0, 0, 0], [0, 1, 2], [0, 4, 5]] + 2 [[5, 6, 0], [8, 9, 0], [0, 0, 0]]
  //            = [[10, 12, 0], [16, 19, 2], [0, 4, 5]]
  auto layer = conv(R"({"type": "conv2d", "out": 1, "kernel": 3, "stride": 2, "padding": 1,
                        "bias": false})",
                    {1, 3, 3});
  LayerHarness<double> h(*layer, 1);
  h.set_parameters(std::vector<double>(9, 1.0));
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<double> y = h.forward(x, 1);
  expect_values(y, {12, 16, 24, 28}, "y");
  const std::vector<double> dx = h.backward(x, y, {1, 0, 0, 2}, 1);
  expect_values(dx, {1, 1, 0, 1, 3, 2, 0, 2, 2}, "dx");
  expect_values(h.grads, {10, 12, 0, 16, 19, 2, 0, 4, 5}, "dW");
}

TEST(Conv2d, BiasGradientIsTheSumOverPositionsAndSamples) {
  // Two samples of (1, 2, 2), kernel 1: db = sum of dy over the 4 positions and 2 samples.
  // dy = 0.5 each: db = 8 * 0.5 = 4. dW = sum dy * x = 0.5 * (1+2+3+4 + 5+6+7+8) = 18.
  auto layer = conv(R"({"type": "conv2d", "out": 1, "kernel": 1})", {1, 2, 2});
  LayerHarness<double> h(*layer, 2);
  h.set_parameters({2.0, 1.0});
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<double> y = h.forward(x, 2);
  expect_values(y, {3, 5, 7, 9, 11, 13, 15, 17}, "y");  // 2 x + 1
  const std::vector<double> dx = h.backward(x, y, std::vector<double>(8, 0.5), 2);
  expect_values(h.grads, {18, 4}, "grads");
  expect_values(dx, std::vector<double>(8, 1.0), "dx");  // 2 * 0.5
}

TEST(Conv2d, ShapesNamesAndDescription) {
  // (2, 5, 7), kernel [2, 3], stride [1, 2], padding [1, 0]:
  // Ho = (5 + 2 - 2) / 1 + 1 = 6, Wo = (7 + 0 - 3) / 2 + 1 = 3; K = 2 * 2 * 3 = 12.
  auto layer = conv(R"({"type": "conv2d", "out": 4, "kernel": [2, 3], "stride": [1, 2],
                        "padding": [1, 0]})",
                    {2, 5, 7});
  EXPECT_EQ(layer->output_shape(), (Shape{4, 6, 3}));
  EXPECT_EQ(layer->describe(), "conv2d4k2x3s1x2p1x0");
  const auto params = layer->parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].name, "weight");
  EXPECT_EQ(params[0].shape, (Shape{4, 2, 2, 3}));
  EXPECT_EQ(params[1].name, "bias");
  EXPECT_EQ(params[1].shape, (Shape{4}));
  EXPECT_EQ(layer->parameter_count(), 4 * 12 + 4);
  EXPECT_DOUBLE_EQ(layer->multiply_adds_per_sample(), 6 * 3 * 4 * 12);  // P * O * K

  auto square = conv(R"({"type": "conv2d", "out": 16, "kernel": 3, "padding": 1})", {3, 8, 8});
  EXPECT_EQ(square->describe(), "conv2d16k3s1p1");
  EXPECT_EQ(square->output_shape(), (Shape{16, 8, 8}));
  auto no_bias = conv(R"({"type": "conv2d", "out": 8, "kernel": [3, 3], "stride": [2, 2],
                          "bias": false})",
                      {3, 8, 8});
  EXPECT_EQ(no_bias->describe(), "conv2d8k3s2p0nb");
  EXPECT_EQ(no_bias->parameters().size(), 1u);
  EXPECT_EQ(no_bias->output_shape(), (Shape{8, 3, 3}));  // (8 - 3) / 2 + 1
}

TEST(Conv2d, InitialisationDrawsWeightsThenBiasInPyTorchBound) {
  // fan_in = 2 * 3 * 3 = 18: every value uniform in [-1/sqrt(18), 1/sqrt(18)), drawn in
  // memory order (weight [4, 2, 3, 3], then bias [4]) from the one generator.
  auto layer = conv(R"({"type": "conv2d", "out": 4, "kernel": 3})", {2, 5, 5});
  LayerHarness<double> h(*layer, 1);
  Rng rng(7), expected(7);
  layer->initialize(rng);
  const double bound = 1.0 / std::sqrt(18.0);
  ASSERT_EQ(h.params.size(), 76u);
  for (size_t i = 0; i < h.params.size(); ++i)
    EXPECT_EQ(h.params[i], expected.uniform(-bound, bound)) << i;
}

TEST(Conv2d, FloatMatchesDouble) {
  const char* json = R"({"type": "conv2d", "out": 5, "kernel": 3, "stride": 2, "padding": 1})";
  auto d = mpiddp::testing::layer<double>(json, {3, 9, 8});
  auto f = mpiddp::testing::layer<float>(json, {3, 9, 8});
  LayerHarness<double> hd(*d, 2);
  LayerHarness<float> hf(*f, 2);
  const std::vector<double> p = test_values(d->parameter_count(), 4),
                            x = test_values(d->inputs() * 2, 5);
  hd.set_parameters(p);
  hf.set_parameters(std::vector<float>(p.begin(), p.end()));
  const std::vector<double> yd = hd.forward(x, 2);
  const std::vector<float> yf = hf.forward(std::vector<float>(x.begin(), x.end()), 2);
  for (size_t i = 0; i < yd.size(); ++i) EXPECT_NEAR(yf[i], yd[i], 1e-5) << i;
}

struct ConvGradientCase {
  const char* json;
  Shape input;
  Index batch;
};

class Conv2dGradient : public ::testing::TestWithParam<ConvGradientCase> {};

TEST_P(Conv2dGradient, MatchesFiniteDifferences) {
  auto layer = conv(GetParam().json, GetParam().input);
  check_layer_gradients(*layer, GetParam().batch);
}

INSTANTIATE_TEST_SUITE_P(
    Conv2d, Conv2dGradient,
    ::testing::Values(
        ConvGradientCase{
            R"({"type": "conv2d", "out": 3, "kernel": 3, "padding": 1})", {2, 5, 5}, 2},
        ConvGradientCase{
            R"({"type": "conv2d", "out": 2, "kernel": [2, 3], "stride": 2, "padding": 1})",
            {3, 6, 7}, 3},
        ConvGradientCase{R"({"type": "conv2d", "out": 2, "kernel": 3, "stride": [2, 1],
                             "padding": [0, 1], "bias": false})",
                         {2, 5, 6}, 2},
        // 1x1, stride 1, no padding: the input is its own im2col matrix.
        ConvGradientCase{R"({"type": "conv2d", "out": 3, "kernel": 1})", {4, 3, 3}, 2},
        ConvGradientCase{
            R"({"type": "conv2d", "out": 2, "kernel": 1, "stride": 2, "bias": false})", {3, 5, 5},
            2},
        // Stride 1 with Wo == W: each tap's column is one run of the input (Note [rows that
        // run on] in conv2d.cpp), with and without padding rows and padding columns.
        ConvGradientCase{
            R"({"type": "conv2d", "out": 2, "kernel": [3, 5], "padding": [0, 2]})", {2, 6, 5}, 2},
        ConvGradientCase{R"({"type": "conv2d", "out": 3, "kernel": [1, 3], "padding": [1, 1],
                             "bias": false})",
                         {1, 4, 3}, 2},
        ConvGradientCase{R"({"type": "conv2d", "out": 2, "kernel": [2, 1]})", {2, 3, 4}, 2},
        // A kernel as large as the padded input: one output position.
        ConvGradientCase{
            R"({"type": "conv2d", "out": 2, "kernel": [5, 4], "padding": 1})", {1, 3, 2}, 2}));

// Config errors: the ConfigError's key path, for one conv2d layer on an input shape.
std::string conv_error_key(const char* json, const Shape& input = {1, 5, 5}) {
  return config_error_key([&] { conv(json, input); });
}

TEST(Conv2dConfig, KernelLargerThanThePaddedInputNamesKernel) {
  EXPECT_EQ(conv_error_key(R"({"type": "conv2d", "out": 2, "kernel": 4})", {1, 3, 3}),
            "model.layers[0].kernel");
  EXPECT_EQ(
      conv_error_key(R"({"type": "conv2d", "out": 2, "kernel": [6, 1], "padding": 1})", {1, 3, 3}),
      "model.layers[0].kernel");
  // Padding 1 makes a 3x3 input 5x5: a kernel of 5 fits.
  EXPECT_EQ(conv_error_key(R"({"type": "conv2d", "out": 2, "kernel": 5, "padding": 1})", {1, 3, 3}),
            "(no error)");
  try {
    conv(R"({"type": "conv2d", "out": 2, "kernel": [4, 2]})", {1, 3, 3});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("(1, 3, 3)"), std::string::npos) << message;
    EXPECT_NE(message.find("4x2"), std::string::npos) << message;
  }
}

TEST(Conv2dConfig, NegativePaddingNamesPadding) {
  EXPECT_EQ(conv_error_key(R"({"type": "conv2d", "out": 2, "kernel": 3, "padding": -1})"),
            "model.layers[0].padding");
  EXPECT_EQ(conv_error_key(R"({"type": "conv2d", "out": 2, "kernel": 3, "padding": [0, -1]})"),
            "model.layers[0].padding");
}

TEST(Conv2dConfig, StrideBelowOneNamesStride) {
  EXPECT_EQ(conv_error_key(R"({"type": "conv2d", "out": 2, "kernel": 3, "stride": 0})"),
            "model.layers[0].stride");
  EXPECT_EQ(conv_error_key(R"({"type": "conv2d", "out": 2, "kernel": 3, "stride": [1, 0]})"),
            "model.layers[0].stride");
}

TEST(Conv2dConfig, InputThatIsNotAnImageNamesTheLayer) {
  EXPECT_EQ(conv_error_key(R"({"type": "conv2d", "out": 2, "kernel": 1})", {9}), "model.layers[0]");
  EXPECT_EQ(conv_error_key(R"({"type": "conv2d", "out": 2, "kernel": 1})", {1, 3, 3, 1}),
            "model.layers[0]");
  try {
    conv(R"({"type": "conv2d", "out": 2, "kernel": 1})", {784});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("(784)"), std::string::npos) << e.what();
  }
}

TEST(Conv2dConfig, KernelNotAnIntOrTwoPositiveIntsNamesKernel) {
  for (const char* json :
       {R"({"type": "conv2d", "out": 2, "kernel": [3]})",
        R"({"type": "conv2d", "out": 2, "kernel": [3, 3, 3]})",
        R"({"type": "conv2d", "out": 2, "kernel": [3, 0]})",
        R"({"type": "conv2d", "out": 2, "kernel": [3, 1.5]})",
        R"({"type": "conv2d", "out": 2, "kernel": [3, "3"]})",
        R"({"type": "conv2d", "out": 2, "kernel": "3"})",
        R"({"type": "conv2d", "out": 2, "kernel": 0})", R"({"type": "conv2d", "out": 2})"})
    EXPECT_EQ(conv_error_key(json), "model.layers[0].kernel") << json;
  try {
    conv(R"({"type": "conv2d", "out": 2, "kernel": [3]})", {1, 5, 5});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("or a list of two, [kh, kw], got [3]"), std::string::npos)
        << e.what();
  }
}

TEST(Conv2dConfig, OutBiasAndUnknownKeys) {
  EXPECT_EQ(conv_error_key(R"({"type": "conv2d", "kernel": 3})"), "model.layers[0].out");
  EXPECT_EQ(conv_error_key(R"({"type": "conv2d", "out": 0, "kernel": 3})"), "model.layers[0].out");
  EXPECT_EQ(conv_error_key(R"({"type": "conv2d", "out": 2, "kernel": 3, "bias": 1})"),
            "model.layers[0].bias");
  EXPECT_EQ(conv_error_key(R"({"type": "conv2d", "out": 2, "kernel": 3, "dilation": 2})"),
            "model.layers[0].dilation");
}

// The resolved config (written to the run's log) has every key, a pair as an int when its
// two sides are equal.
TEST(Conv2dConfig, ResolvedConfigHasEveryKey) {
  io::Json root = io::Json::parse(R"({"layers": [{"type": "conv2d", "out": 2, "kernel": [3, 3],
                                                  "stride": [1, 2]}]})");
  io::JsonSection section(&root, "model");
  parse_layer_list(section, "layers");
  EXPECT_EQ(section.resolved()["layers"][0].dump(),
            R"({"type":"conv2d","out":2,"kernel":3,"stride":[1,2],"padding":0,"bias":true})");
}

// A small CNN: conv2d -> relu -> maxpool2d -> flatten -> linear, built from JSON as a config's
// model.layers. Input (2, 6, 6): conv (3, 6, 6), pool (3, 3, 3), flatten (27), linear (4).
const char* kCnn = R"([
    {"type": "conv2d", "out": 3, "kernel": 3, "padding": 1}, {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"}, {"type": "linear", "out": 4}])";

TEST(ConvNet, TensorsAreNamedAsPyTorch) {
  Model<float> model({2, 6, 6}, mpiddp::testing::specs(kCnn), 4);
  EXPECT_EQ(model.describe(), "2x6x6-conv2d3k3s1p1-relu-maxpool2d2-flatten-linear4");
  EXPECT_EQ(model.output_shape(), (Shape{4}));
  // 3*2*3*3 + 3 + 4*27 + 4 = 54 + 3 + 108 + 4
  EXPECT_EQ(model.parameter_count(), 169);
  // Per sample: 36 positions * 3 outputs * 18 taps + 27 * 4
  EXPECT_DOUBLE_EQ(model.multiply_adds_per_sample(), 36 * 3 * 18 + 27 * 4);
  const auto& t = model.tensors();
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].name, "0.weight");
  EXPECT_EQ(t[0].shape, (std::vector<Index>{3, 2, 3, 3}));
  EXPECT_EQ(t[0].offset, 0);
  EXPECT_EQ(t[1].name, "0.bias");
  EXPECT_EQ(t[1].shape, (std::vector<Index>{3}));
  EXPECT_EQ(t[1].offset, 54);
  EXPECT_EQ(t[2].name, "4.weight");
  EXPECT_EQ(t[2].shape, (std::vector<Index>{4, 27}));
  EXPECT_EQ(t[2].offset, 57);
  EXPECT_EQ(t[3].name, "4.bias");
  EXPECT_EQ(t[3].offset, 165);
}

TEST(ConvNet, NetworkGradientMatchesFiniteDifferences) {
  const Index batch = 3;
  Model<double> model({2, 6, 6}, mpiddp::testing::specs(kCnn), batch);
  model.initialize(3);
  EXPECT_GT(mpiddp::testing::check_model_gradients(model, batch), 1e-3);  // not vacuous
}

}  // namespace
}  // namespace mpiddp::nn
