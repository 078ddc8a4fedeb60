// maxpool2d, avgpool2d, global_avgpool and flatten.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "../support/config_errors.hpp"
#include "../support/layer_harness.hpp"
#include "mpiddp/core/error.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::test::config_error_key;
using mpiddp::testing::check_layer_gradients;
using mpiddp::testing::expect_values;
using mpiddp::testing::LayerHarness;

std::unique_ptr<Layer<double>> make(const char* json, const Shape& input) {
  return mpiddp::testing::layer<double>(json, input);
}

TEST(MaxPool2d, HandValuesAndGradientRouting) {
  // x (1, 4, 4) = [[1, 3, 2, 0], [4, -1, 5, 6], [0, 2, 7, 1], [3, 8, -2, 4]], kernel 2:
  // y = [max(1, 3, 4, -1), max(2, 0, 5, 6), max(0, 2, 3, 8), max(7, 1, -2, 4)] = [4, 6, 8, 7],
  // found at offsets (1,0) = 4, (1,3) = 7, (3,1) = 13, (2,2) = 10, where dy = [1, 2, 3, 4] goes.
  auto layer = make(R"({"type": "maxpool2d", "kernel": 2})", {1, 4, 4});
  EXPECT_EQ(layer->output_shape(), (Shape{1, 2, 2}));
  LayerHarness<double> h(*layer, 1);
  const std::vector<double> x = {1, 3, 2, 0, 4, -1, 5, 6, 0, 2, 7, 1, 3, 8, -2, 4};
  const std::vector<double> y = h.forward(x, 1);
  expect_values(y, {4, 6, 8, 7}, "y");
  std::vector<double> expected_dx(16, 0.0);
  expected_dx[4] = 1, expected_dx[7] = 2, expected_dx[13] = 3, expected_dx[10] = 4;
  expect_values(h.backward(x, y, {1, 2, 3, 4}, 1), expected_dx, "dx");
}

TEST(MaxPool2d, TiesGoToTheFirstMaximum) {
  // Two samples of (1, 2, 2), kernel 2: [5, 5, 5, 5] has its first maximum at 0,
  // [1, 5, 5, 2] at 1 (row-major order), as PyTorch routes them.
  auto layer = make(R"({"type": "maxpool2d", "kernel": 2})", {1, 2, 2});
  LayerHarness<double> h(*layer, 2);
  const std::vector<double> x = {5, 5, 5, 5, 1, 5, 5, 2};
  const std::vector<double> y = h.forward(x, 2);
  expect_values(y, {5, 5}, "y");
  expect_values(h.backward(x, y, {1, 1}, 2), {1, 0, 0, 0, 0, 1, 0, 0}, "dx");
}

TEST(MaxPool2d, PaddingIsMinusInfinity) {
  // x (1, 2, 2) = [[-1, -2], [-3, -4]], kernel 2, stride 1, padding 1: Ho = (2 + 2 - 2) + 1 = 3.
  // Zero padding would make most outputs 0; with -inf only input values compete:
  //   [[-1, -1, -2], [-1, -1, -2], [-3, -3, -4]]
  // dy = ones: x(0,0) wins 4 windows, x(0,1) 2, x(1,0) 2, x(1,1) 1.
  auto layer = make(R"({"type": "maxpool2d", "kernel": 2, "stride": 1, "padding": 1})", {1, 2, 2});
  LayerHarness<double> h(*layer, 1);
  const std::vector<double> x = {-1, -2, -3, -4};
  const std::vector<double> y = h.forward(x, 1);
  expect_values(y, {-1, -1, -2, -1, -1, -2, -3, -3, -4}, "y");
  expect_values(h.backward(x, y, std::vector<double>(9, 1.0), 1), {4, 2, 2, 1}, "dx");
}

// PyTorch's scan over one unpadded window: row-major from its first value, a later value
// wins when it is larger or NaN. Returns the winner's offset in the plane.
Index scan_window(const std::vector<float>& plane, Index width, Index top, Index left, Index k) {
  Index best = top * width + left;
  for (Index r = 0; r < k; ++r)
    for (Index q = 0; q < k; ++q) {
      const Index i = (top + r) * width + left + q;
      if (plane[i] > plane[best] || std::isnan(plane[i])) best = i;
    }
  return best;
}

TEST(MaxPool2d, TiledWindowsPickThePlainScansWinners) {
  // maxpool2d 2 and 3 (no padding, stride = kernel) take a vectorised path that keeps the
  // best value beside its offset: it must route to the same input as the scan, with many
  // ties (values from {-1, 0, 1, 2}), NaNs (one in 7), and sizes that leave a remainder.
  for (const Index k : {2, 3}) {
    const Index channels = 3, height = 4 * k + 1, width = 5 * k + k - 1, batch = 2;
    const std::string json = R"({"type": "maxpool2d", "kernel": )" + std::to_string(k) + "}";
    auto layer = mpiddp::testing::layer<float>(json.c_str(), {channels, height, width});
    const Index out_h = height / k, out_w = width / k, plane = height * width;
    ASSERT_EQ(layer->output_shape(), (Shape{channels, out_h, out_w}));
    std::vector<float> x(static_cast<size_t>(layer->inputs() * batch));
    uint32_t state = 12345;
    for (float& v : x) {
      state = state * 1664525u + 1013904223u;
      v = (state >> 28) % 7 == 0 ? NAN : static_cast<float>((state >> 24) % 4) - 1.0f;
    }
    LayerHarness<float> h(*layer, batch);
    const std::vector<float> y = h.forward(x, batch);
    std::vector<float> dy(y.size());
    for (size_t o = 0; o < dy.size(); ++o) dy[o] = static_cast<float>(o + 1);  // says which output
    const std::vector<float> dx = h.backward(x, y, dy, batch);
    std::vector<float> expected_dx(x.size(), 0.0f);
    for (Index s = 0; s < batch; ++s)
      for (Index c = 0; c < channels; ++c) {
        const Index first = (s * channels + c) * plane;
        const std::vector<float> values(x.begin() + first, x.begin() + first + plane);
        for (Index oh = 0; oh < out_h; ++oh)
          for (Index ow = 0; ow < out_w; ++ow) {
            const Index o = ((s * channels + c) * out_h + oh) * out_w + ow;
            const Index at = scan_window(values, width, oh * k, ow * k, k);
            const float got = y[static_cast<size_t>(o)], want = values[static_cast<size_t>(at)];
            EXPECT_TRUE(got == want || (std::isnan(got) && std::isnan(want)))
                << "k " << k << " output " << o << ": " << got << " against " << want;
            expected_dx[static_cast<size_t>(first + at)] += dy[static_cast<size_t>(o)];
          }
      }
    EXPECT_EQ(dx, expected_dx) << "k " << k << ": the gradient went to another maximum";
  }
}

TEST(AvgPool2d, PaddingCountsInTheDivisor) {
  // x (1, 2, 2) = [[1, 2], [3, 4]], kernel 2, stride 1, padding 1: every window divides by 4
  // (count_include_pad): [[1/4, 3/4, 2/4], [4/4, 10/4, 6/4], [3/4, 7/4, 4/4]].
  // dy = 1..9: each input gets a quarter of the dy of the 4 windows holding it:
  //   x(0,0): (1+2+4+5)/4 = 3, x(0,1): (2+3+5+6)/4 = 4, x(1,0): (4+5+7+8)/4 = 6, x(1,1): 28/4 = 7
  auto layer = make(R"({"type": "avgpool2d", "kernel": 2, "stride": 1, "padding": 1})", {1, 2, 2});
  LayerHarness<double> h(*layer, 1);
  const std::vector<double> x = {1, 2, 3, 4};
  const std::vector<double> y = h.forward(x, 1);
  expect_values(y, {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1}, "y");
  expect_values(h.backward(x, y, {1, 2, 3, 4, 5, 6, 7, 8, 9}, 1), {3, 4, 6, 7}, "dx");
}

TEST(AvgPool2d, NonSquareKernelHandValues) {
  // x (1, 2, 4) = [[1, 2, 3, 4], [5, 6, 7, 8]], kernel [2, 2], stride [1, 2]: Ho = 1, Wo = 2:
  // y = [(1+2+5+6)/4, (3+4+7+8)/4] = [3.5, 5.5]
  auto layer = make(R"({"type": "avgpool2d", "kernel": 2, "stride": [1, 2]})", {1, 2, 4});
  LayerHarness<double> h(*layer, 1);
  expect_values(h.forward({1, 2, 3, 4, 5, 6, 7, 8}, 1), {3.5, 5.5}, "y");
}

TEST(GlobalAvgPool, ChannelMeans) {
  // Two samples of (2, 2, 3): sample 0 has channel 0 = 1..6 (mean 21/6 = 3.5) and channel 1
  // = [0, 0, 0, 0, 0, 6] (mean 1); sample 1 is its negative. dy = [6, -12, 0, 3] spreads as
  // dy / 6 over each channel's 6 pixels: 1, -2, 0, 0.5.
  auto layer = make(R"({"type": "global_avgpool"})", {2, 2, 3});
  EXPECT_EQ(layer->output_shape(), (Shape{2}));
  EXPECT_EQ(layer->describe(), "global_avgpool");
  LayerHarness<double> h(*layer, 2);
  std::vector<double> x = {1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 6};
  for (int i = 0; i < 12; ++i) x.push_back(-x[i]);
  const std::vector<double> y = h.forward(x, 2);
  expect_values(y, {3.5, 1, -3.5, -1}, "y");
  std::vector<double> expected_dx;
  for (double share : {1.0, -2.0, 0.0, 0.5}) expected_dx.insert(expected_dx.end(), 6, share);
  expect_values(h.backward(x, y, {6, -12, 0, 3}, 2), expected_dx, "dx");
}

TEST(Flatten, KeepsTheValuesInPyTorchOrder) {
  // (2, 2, 2) -> (8): sample b's values are x[b] in (c, h, w) row-major order, unchanged.
  auto layer = make(R"({"type": "flatten"})", {2, 2, 2});
  EXPECT_EQ(layer->output_shape(), (Shape{8}));
  EXPECT_EQ(layer->describe(), "flatten");
  LayerHarness<double> h(*layer, 2);
  std::vector<double> x(16);
  for (int i = 0; i < 16; ++i) x[i] = i - 3.5;
  const std::vector<double> y = h.forward(x, 2);
  expect_values(y, x, "y");
  expect_values(h.backward(x, y, y, 2), x, "dx");
  EXPECT_EQ(make(R"({"type": "flatten"})", {5})->output_shape(), (Shape{5}));
}

TEST(Pool2d, Descriptions) {
  EXPECT_EQ(make(R"({"type": "maxpool2d", "kernel": 2})", {1, 4, 4})->describe(), "maxpool2d2");
  EXPECT_EQ(make(R"({"type": "maxpool2d", "kernel": 2, "stride": 2})", {1, 4, 4})->describe(),
            "maxpool2d2");
  EXPECT_EQ(make(R"({"type": "maxpool2d", "kernel": 3, "stride": 2, "padding": 1})", {1, 5, 5})
                ->describe(),
            "maxpool2d3s2p1");
  EXPECT_EQ(make(R"({"type": "avgpool2d", "kernel": [2, 3], "stride": 1})", {1, 5, 5})->describe(),
            "avgpool2d2x3s1");
  EXPECT_EQ(make(R"({"type": "avgpool2d", "kernel": 2, "padding": [1, 0]})", {1, 5, 5})->describe(),
            "avgpool2d2p1x0");
  // (5 + 2 - 3) / 2 + 1 = 3 and (6 - 2) / 3 + 1 = 2
  EXPECT_EQ(make(R"({"type": "maxpool2d", "kernel": [3, 2], "stride": [2, 3], "padding": [1, 0]})",
                 {4, 5, 6})
                ->output_shape(),
            (Shape{4, 3, 2}));
}

struct PoolGradientCase {
  const char* json;
  Shape input;
  Index batch;
};

class PoolGradient : public ::testing::TestWithParam<PoolGradientCase> {};

// Max pooling is piecewise linear: the test values are distinct enough that no window's
// maximum changes under the 1e-6 steps of the finite differences.
TEST_P(PoolGradient, MatchesFiniteDifferences) {
  auto layer = make(GetParam().json, GetParam().input);
  check_layer_gradients(*layer, GetParam().batch);
}

INSTANTIATE_TEST_SUITE_P(
    Pool, PoolGradient,
    ::testing::Values(
        PoolGradientCase{R"({"type": "maxpool2d", "kernel": 2})", {2, 4, 4}, 2},
        PoolGradientCase{
            R"({"type": "maxpool2d", "kernel": 3, "stride": 2, "padding": 1})", {2, 5, 5}, 2},
        PoolGradientCase{
            R"({"type": "maxpool2d", "kernel": [2, 3], "stride": [1, 2], "padding": 1})",
            {1, 5, 6}, 3},
        PoolGradientCase{R"({"type": "avgpool2d", "kernel": 2})", {2, 4, 4}, 2},
        PoolGradientCase{
            R"({"type": "avgpool2d", "kernel": 3, "stride": 2, "padding": 1})", {2, 5, 5}, 2},
        PoolGradientCase{
            R"({"type": "avgpool2d", "kernel": [3, 2], "stride": [2, 1], "padding": [1, 0]})",
            {1, 5, 4},
            3},
        PoolGradientCase{R"({"type": "global_avgpool"})", {3, 4, 5}, 2},
        PoolGradientCase{R"({"type": "flatten"})", {2, 3, 4}, 2}));

std::string pool_error_key(const char* json, const Shape& input = {1, 5, 5}) {
  return config_error_key([&] { make(json, input); });
}

class PoolConfig : public ::testing::TestWithParam<const char*> {};

// "{type}" in each JSON text below stands for the pool's type.
std::string with_type(const char* json, const std::string& type) {
  std::string text = json;
  text.replace(text.find("{type}"), 6, type);
  return text;
}

TEST_P(PoolConfig, KernelLargerThanThePaddedInputNamesKernel) {
  const std::string json = with_type(R"({"type": "{type}", "kernel": 4})", GetParam());
  EXPECT_EQ(pool_error_key(json.c_str(), {1, 3, 3}), "model.layers[0].kernel");
  try {
    make(json.c_str(), {1, 3, 3});
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("(1, 3, 3)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("4x4"), std::string::npos) << e.what();
  }
  // Padding 1 makes 3x3 5x5: a kernel of 4 fits (padding 1 <= 4 / 2).
  const std::string padded =
      with_type(R"({"type": "{type}", "kernel": 4, "padding": 1})", GetParam());
  EXPECT_EQ(pool_error_key(padded.c_str(), {1, 3, 3}), "(no error)");
}

TEST_P(PoolConfig, PaddingMoreThanHalfTheKernelOrNegativeNamesPadding) {
  for (const char* json : {R"({"type": "{type}", "kernel": 2, "padding": 2})",
                           R"({"type": "{type}", "kernel": 3, "padding": [1, 2]})",
                           R"({"type": "{type}", "kernel": 1, "padding": 1})",
                           R"({"type": "{type}", "kernel": 2, "padding": -1})"}) {
    const std::string text = with_type(json, GetParam());
    EXPECT_EQ(pool_error_key(text.c_str()), "model.layers[0].padding") << text;
  }
}

TEST_P(PoolConfig, StrideBelowOneNamesStride) {
  const std::string json =
      with_type(R"({"type": "{type}", "kernel": 2, "stride": [0, 1]})", GetParam());
  EXPECT_EQ(pool_error_key(json.c_str()), "model.layers[0].stride");
}

TEST_P(PoolConfig, InputThatIsNotAnImageNamesTheLayer) {
  const std::string json = with_type(R"({"type": "{type}", "kernel": 2})", GetParam());
  EXPECT_EQ(pool_error_key(json.c_str(), {16}), "model.layers[0]");
}

TEST_P(PoolConfig, KernelNotAnIntOrTwoPositiveIntsNamesKernel) {
  for (const char* json :
       {R"({"type": "{type}", "kernel": [2]})", R"({"type": "{type}", "kernel": [2, -2]})",
        R"({"type": "{type}", "kernel": [2, 2, 2]})", R"({"type": "{type}", "kernel": true})",
        R"({"type": "{type}"})"}) {
    const std::string text = with_type(json, GetParam());
    EXPECT_EQ(pool_error_key(text.c_str()), "model.layers[0].kernel") << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Pool, PoolConfig, ::testing::Values("maxpool2d", "avgpool2d"));

TEST(GlobalAvgPoolConfig, NeedsAnImageAndTakesNoKeys) {
  EXPECT_EQ(pool_error_key(R"({"type": "global_avgpool"})", {16}), "model.layers[0]");
  EXPECT_EQ(pool_error_key(R"({"type": "global_avgpool", "kernel": 2})"), "model.layers[0].kernel");
  EXPECT_EQ(pool_error_key(R"({"type": "flatten", "start_dim": 1})"), "model.layers[0].start_dim");
}

}  // namespace
}  // namespace mpiddp::nn
