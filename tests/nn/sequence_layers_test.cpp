// The layers that act on a sequence (T, C), features in the last dimension: linear on each
// position, layernorm, position_embedding, gelu's tanh form and attention. Hand values, central
// differences of input and parameter gradients in float64, and the shape errors.
// tests/nn/layer_golden_test.cpp compares them with PyTorch as well.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "../support/layer_harness.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::check_layer_gradients;
using mpiddp::testing::layer;
using mpiddp::testing::LayerHarness;

TEST(LinearOnASequence, EachPositionIsTheFlatLayersProduct) {
  auto sequence = layer<double>(R"({"type": "linear", "out": 3})", {4, 5});
  auto flat = layer<double>(R"({"type": "linear", "out": 3})", {5});
  EXPECT_EQ(sequence->output_shape(), (Shape{4, 3}));
  EXPECT_EQ(sequence->describe(), flat->describe());  // the same tensors, the same weight files
  EXPECT_EQ(sequence->parameters()[0].shape, (Shape{3, 5}));
  EXPECT_EQ(sequence->multiply_adds_per_sample(), 4 * 5 * 3);
  LayerHarness<double> hs(*sequence, 2), hf(*flat, 8);
  const std::vector<double> params = mpiddp::testing::test_values(18, 4);
  hs.set_parameters(params);
  hf.set_parameters(params);
  const std::vector<double> x = mpiddp::testing::test_values(40, 5);  // 2 samples of (4, 5)
  // The 8 positions as 8 flat samples: the same memory.
  const std::vector<double> ys = hs.forward(x, 2), yf = hf.forward(x, 8);
  ASSERT_EQ(ys.size(), yf.size());
  for (size_t i = 0; i < ys.size(); ++i) EXPECT_NEAR(ys[i], yf[i], 1e-15) << i;
  const std::vector<double> dy = mpiddp::testing::test_values(24, 6);
  const std::vector<double> dxs = hs.backward(x, ys, dy, 2), dxf = hf.backward(x, yf, dy, 8);
  for (size_t i = 0; i < dxs.size(); ++i) EXPECT_NEAR(dxs[i], dxf[i], 1e-15) << i;
  for (size_t i = 0; i < hs.grads.size(); ++i) EXPECT_NEAR(hs.grads[i], hf.grads[i], 1e-14) << i;
}

TEST(LinearOnASequence, GradientsMatchCentralDifferences) {
  auto linear = layer<double>(R"({"type": "linear", "out": 3})", {4, 5});
  check_layer_gradients(*linear, 3);
}

TEST(LayerNorm, HandValues) {
  // Row (1, 2, 3): mean 2, biased variance 2/3, so y = (x - 2) / sqrt(2/3 + 1e-5) * w + b.
  // Row (4, 4, 4): variance 0, so y = 0 * w + b = b.
  auto norm = layer<double>(R"({"type": "layernorm"})", {2, 3});
  EXPECT_EQ(norm->parameters().size(), 2u);
  LayerHarness<double> h(*norm, 1);
  h.set_parameters({1, 2, -1, 0.5, 0, 0.25});  // weight (1, 2, -1), bias (0.5, 0, 0.25)
  const std::vector<double> y = h.forward({1, 2, 3, 4, 4, 4}, 1);
  const double s = 1 / std::sqrt(2.0 / 3 + 1e-5);
  const std::vector<double> expected = {-s + 0.5, 0.0, -s + 0.25, 0.5, 0.0, 0.25};
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(y[i], expected[i], 1e-15) << i;
}

TEST(LayerNorm, GradientsMatchCentralDifferences) {
  auto affine = layer<double>(R"({"type": "layernorm"})", {3, 6});
  check_layer_gradients(*affine, 2);
  auto plain = layer<double>(R"({"type": "layernorm", "affine": false, "eps": 0.001})", {5});
  EXPECT_TRUE(plain->parameters().empty());
  check_layer_gradients(*plain, 3);
}

TEST(PositionEmbedding, AddsRowTToPositionT) {
  auto pe = layer<double>(R"({"type": "position_embedding", "positions": 4})", {2, 3});
  EXPECT_EQ(pe->parameters()[0].shape, (Shape{4, 3}));  // the whole table, T = 2 of it used
  LayerHarness<double> h(*pe, 2);
  std::vector<double> table(12);
  for (size_t i = 0; i < 12; ++i) table[i] = static_cast<double>(10 * i);
  h.set_parameters(table);
  const std::vector<double> y = h.forward({1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}, 2);
  const std::vector<double> expected = {1, 11, 21, 32, 42, 52, 3, 13, 23, 34, 44, 54};
  EXPECT_EQ(y, expected);
  // d table: rows 0 and 1 get the two samples' gradients added; rows 2 and 3 nothing.
  const std::vector<double> dy = {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60};
  const std::vector<double> dx = h.backward({}, y, dy, 2);
  EXPECT_EQ(dx, dy);
  EXPECT_EQ(h.grads, (std::vector<double>{11, 22, 33, 44, 55, 66, 0, 0, 0, 0, 0, 0}));
}

TEST(PositionEmbedding, GradientsMatchCentralDifferences) {
  auto pe = layer<double>(R"({"type": "position_embedding", "positions": 5})", {3, 4});
  check_layer_gradients(*pe, 2);
}

TEST(GeluTanh, HandValuesAndGradients) {
  auto gelu = layer<double>(R"({"type": "gelu", "approximate": "tanh"})", {3});
  EXPECT_EQ(gelu->type(), "gelu");
  EXPECT_EQ(gelu->describe(), "gelutanh");  // another function: another model description
  EXPECT_EQ(layer<double>(R"({"type": "gelu"})", {3})->describe(), "gelu");
  LayerHarness<double> h(*gelu, 1);
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) at x = 1: tanh(0.7978845608 * 1.044715).
  const double at_one = 0.5 * (1 + std::tanh(std::sqrt(2 / M_PI) * 1.044715));
  const std::vector<double> y = h.forward({1, 0, -2}, 1);
  EXPECT_NEAR(y[0], at_one, 1e-15);
  EXPECT_NEAR(y[0], 0.8411919906082768, 1e-13);  // PyTorch's F.gelu(1, approximate="tanh")
  EXPECT_EQ(y[1], 0.0);
  EXPECT_NEAR(y[2], -0.04540230591222, 1e-13);
  check_layer_gradients(*gelu, 4);
}

TEST(Attention, HandValues) {
  // One head of width 1, q = k = v = x (c_attn's weight (1, 1, 1), c_proj's 1, biases 0), x =
  // (1, 2). Position 0 sees itself alone: 1. Position 1 weighs x0, x1 by softmax(2 * 1,
  // 2 * 2) = (1, e^2) / (1 + e^2): (1 + 2 e^2) / (1 + e^2). Without the mask position 0 also
  // sees x1: softmax(1, 2) = (1, e) / (1 + e), so (1 + 2 e) / (1 + e).
  for (const bool causal : {true, false}) {
    auto attention = layer<double>(causal ? R"({"type": "attention", "heads": 1})"
                                          : R"({"type": "attention", "heads": 1, "causal": false})",
                                   {2, 1});
    EXPECT_EQ(attention->parameters()[0].name, "c_attn.weight");
    EXPECT_EQ(attention->parameters()[0].shape, (Shape{3, 1}));
    LayerHarness<double> h(*attention, 1);
    h.set_parameters({1, 1, 1, 0, 0, 0, 1, 0});  // c_attn.weight, c_attn.bias, c_proj.weight, c_proj.bias
    const std::vector<double> y = h.forward({1, 2}, 1);
    const double e = std::exp(1.0);
    EXPECT_NEAR(y[0], causal ? 1.0 : (1 + 2 * e) / (1 + e), 1e-15);
    EXPECT_NEAR(y[1], (1 + 2 * e * e) / (1 + e * e), 1e-15);
  }
}

TEST(Attention, GradientsMatchCentralDifferences) {
  for (const char* json : {R"({"type": "attention", "heads": 2})", R"({"type": "attention", "heads": 1, "causal": false})",
                           R"({"type": "attention", "heads": 3, "bias": false})"}) {
    SCOPED_TRACE(json);
    auto attention = layer<double>(json, {4, 6});
    check_layer_gradients(*attention, 2);
  }
}

std::string layer_build_error(const char* json, const Shape& input) {
  try {
    layer<float>(json, input);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SequenceLayers, ShapeErrorsNameTheKey) {
  EXPECT_NE(layer_build_error(R"({"type": "linear", "out": 2})", {1, 4, 4}).find("linear needs a flat input (F) or a sequence (T, F)"),
            std::string::npos);
  EXPECT_NE(layer_build_error(R"({"type": "position_embedding", "positions": 4})", {5, 3})
                .find("model.layers[0].positions: the sequence has 5 positions but the table 4"),
            std::string::npos);
  EXPECT_NE(layer_build_error(R"({"type": "position_embedding", "positions": 4})", {3})
                .find("position_embedding takes a sequence (T, C)"),
            std::string::npos);
  EXPECT_NE(layer_build_error(R"({"type": "gelu", "approximate": "fast"})", {3}).find("model.layers[0].approximate"),
            std::string::npos);
  EXPECT_NE(layer_build_error(R"({"type": "layernorm", "eps": 0})", {3}).find("model.layers[0].eps"), std::string::npos);
  EXPECT_NE(layer_build_error(R"({"type": "attention", "heads": 4})", {3, 6}).find("model.layers[0].heads: 4 heads do not divide the width 6"),
            std::string::npos);
  EXPECT_NE(layer_build_error(R"({"type": "attention"})", {3, 6}).find("model.layers[0].heads: required key is missing"),
            std::string::npos);
  EXPECT_NE(layer_build_error(R"({"type": "attention", "heads": 1})", {6}).find("attention takes a sequence (T, C)"),
            std::string::npos);
  // attention's own dropout is built (tests/nn/attention_dropout_test.cpp): a probability in [0, 1).
  EXPECT_EQ(layer_build_error(R"({"type": "attention", "heads": 1, "dropout": 0.1})", {3, 6}), "");
  EXPECT_NE(layer_build_error(R"({"type": "attention", "heads": 1, "dropout": 1})", {3, 6})
                .find("model.layers[0].dropout: expected a drop probability in [0, 1), got 1"),
            std::string::npos);
  EXPECT_NE(layer_build_error(R"({"type": "attention", "heads": 1, "dropout": -0.5})", {3, 6}).find("model.layers[0].dropout"),
            std::string::npos);
}

}  // namespace
}  // namespace mpiddp::nn
