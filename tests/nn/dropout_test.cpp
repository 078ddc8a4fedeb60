#include "mpiddp/nn/dropout.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "../support/config_errors.hpp"
#include "../support/layer_harness.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/core/philox.hpp"
#include "mpiddp/core/rng.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::check_layer_gradients;
using mpiddp::testing::LayerHarness;
using mpiddp::testing::test_values;

std::unique_ptr<Layer<double>> dropout(double p, Index values) {
  const std::string json = R"({"type": "dropout", "p": )" + std::to_string(p) + "}";
  return testing::layer<double>(json.c_str(), {values});
}

using testing::random_pass_context;

// The layer's multipliers for a batch: its output for x = 1.
std::vector<double> mask(Layer<double>& layer, Index batch, const PassContext& context) {
  LayerHarness<double> h(layer, batch);
  return h.forward(std::vector<double>(static_cast<size_t>(layer.inputs() * batch), 1.0), batch,
                   context);
}

double fraction_differing(const std::vector<double>& a, const std::vector<double>& b) {
  size_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += a[i] != b[i];
  return static_cast<double>(differing) / static_cast<double>(a.size());
}

TEST(Dropout, DeclaresNoTensorsAndAMaskOfScratch) {
  auto layer = testing::layer<float>(R"({"type": "dropout"})", {3, 4, 4});
  EXPECT_EQ(layer->type(), "dropout");
  EXPECT_EQ(layer->describe(), "dropout");
  EXPECT_EQ(layer->output_shape(), (Shape{3, 4, 4}));
  EXPECT_TRUE(layer->parameters().empty());
  EXPECT_TRUE(layer->buffers().empty());
  EXPECT_EQ(layer->scratch_bytes(5), 48u * 5 * sizeof(float));
  EXPECT_DOUBLE_EQ(dynamic_cast<Dropout<float>&>(*layer).p(), 0.5);  // PyTorch's default
  EXPECT_EQ(testing::layer<float>(R"({"type": "dropout", "p": 0})", {8})->scratch_bytes(5), 0u);
}

TEST(Dropout, KeepsAboutOneMinusPOfTheValuesScaledExactly) {
  // 100,000 values, each kept with probability 1 - p: the kept count is Binomial(n, 1 - p)
  // with standard deviation sqrt(n p (1 - p)) <= 158. The bound is 5 of them, which a
  // correct generator misses with probability 6e-7.
  const Index values = 1000, batch = 100;
  const double n = static_cast<double>(values * batch);
  for (double p : {0.1, 0.5, 0.8}) {
    SCOPED_TRACE("p = " + std::to_string(p));
    auto layer = dropout(p, values);
    const std::vector<double> m = mask(*layer, batch, random_pass_context());
    const double scale = 1.0 / (1.0 - p);
    double kept = 0;
    for (double v : m) {
      ASSERT_TRUE(v == 0.0 || v == scale) << v;  // the multiplier is exactly 1/(1-p)
      kept += v != 0.0;
    }
    EXPECT_NEAR(kept, n * (1 - p), 5 * std::sqrt(n * p * (1 - p)));
  }
}

TEST(Dropout, KeptValuesAreScaledExactlyInFloat) {
  // p = 0.5: kept values are exactly 2 x; p = 0.2: exactly x * float(1.25).
  for (double p : {0.5, 0.2}) {
    const std::string json = R"({"type": "dropout", "p": )" + std::to_string(p) + "}";
    auto layer = testing::layer<float>(json.c_str(), {64});
    LayerHarness<float> h(*layer, 4);
    std::vector<float> x(256);
    const std::vector<double> values = test_values(256, 3);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(values[i]);
    const std::vector<float> y = h.forward(x, 4, random_pass_context());
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    int kept = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(y[i] == 0.0f || y[i] == x[i] * scale) << i;
      kept += y[i] != 0.0f;
    }
    EXPECT_GT(kept, 0);
  }
}

TEST(Dropout, FollowsTheDocumentedCounter) {
  // Note [the dropout counter]: value j of the sample at position q is dropped when lane
  // j % 4 of philox4x32_10((j/4, q, step, epoch), mix_seed(seed, fnv1a(key))) * 2^-32 < p.
  // Pinned here: changing it changes every run's masks (and what a resume continues).
  const Index values = 10;
  auto layer = dropout(0.5, values);
  const Index positions[] = {3, 70000};
  const PassContext context = random_pass_context(99, 4, 123456, positions);
  const std::vector<double> m = mask(*layer, 2, context);
  const uint64_t seed = mix_seed(99, fnv1a("model.layers[0]"));
  const PhiloxKey key = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  for (Index b = 0; b < 2; ++b)
    for (Index j = 0; j < values; ++j) {
      const PhiloxCounter words = philox4x32_10(
          {static_cast<uint32_t>(j / 4), static_cast<uint32_t>(positions[b]), 123456, 4}, key);
      const bool dropped = words[static_cast<size_t>(j % 4)] * 0x1p-32 < 0.5;
      EXPECT_EQ(m[b * values + j], dropped ? 0.0 : 2.0) << "sample " << b << ", value " << j;
    }
}

TEST(Dropout, TheMaskFollowsThePositionNotTheColumn) {
  // 8 samples with positions 0..7; the same samples in another column order, the positions
  // permuted with them; and the two halves of the batch as two ranks would see them.
  const Index values = 37, batch = 8;
  auto layer = dropout(0.5, values);
  const Index in_order[] = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<double> reference = mask(*layer, batch, random_pass_context(7, 1, 5, in_order));
  // Null positions mean position = column.
  EXPECT_EQ(mask(*layer, batch, random_pass_context(7, 1, 5, nullptr)), reference);

  const Index permutation[] = {5, 2, 7, 0, 3, 6, 1, 4};
  const std::vector<double> permuted = mask(*layer, batch, random_pass_context(7, 1, 5, permutation));
  for (Index b = 0; b < batch; ++b)
    for (Index j = 0; j < values; ++j)
      ASSERT_EQ(permuted[b * values + j], reference[permutation[b] * values + j]) << b << ", " << j;

  // Two "ranks" with four samples each: positions 0..3 and 4..7 of the global batch.
  const std::vector<double> first = mask(*layer, 4, random_pass_context(7, 1, 5, in_order));
  const std::vector<double> second = mask(*layer, 4, random_pass_context(7, 1, 5, in_order + 4));
  std::vector<double> joined = first;
  joined.insert(joined.end(), second.begin(), second.end());
  EXPECT_EQ(joined, reference);
}

TEST(Dropout, DiffersForAnotherStepEpochPositionSeedOrLayer) {
  // p = 0.5: two independent masks differ in each value with probability 1/2. Over 2000
  // values the fraction's standard deviation is 0.011; 0.4 is 9 of them below 0.5.
  const Index values = 2000;
  auto layer = dropout(0.5, values);
  const Index position[] = {12};
  const Index other_position[] = {13};
  const std::vector<double> base = mask(*layer, 1, random_pass_context(42, 2, 17, position));
  EXPECT_GT(fraction_differing(base, mask(*layer, 1, random_pass_context(42, 2, 18, position))), 0.4);
  EXPECT_GT(fraction_differing(base, mask(*layer, 1, random_pass_context(42, 3, 17, position))), 0.4);
  EXPECT_GT(fraction_differing(base, mask(*layer, 1, random_pass_context(43, 2, 17, position))), 0.4);
  EXPECT_GT(fraction_differing(base, mask(*layer, 1, random_pass_context(42, 2, 17, other_position))),
            0.4);
  // The second dropout layer of a model: another key path, another mask.
  const auto list = testing::specs(R"([{"type": "dropout"}, {"type": "dropout"}])");
  auto first = build_layer<double>(list[0], {values});
  auto second = build_layer<double>(list[1], {values});
  EXPECT_EQ(mask(*first, 1, random_pass_context(42, 2, 17, position)), base);  // model.layers[0]
  EXPECT_GT(fraction_differing(base, mask(*second, 1, random_pass_context(42, 2, 17, position))), 0.4);
  // No state: the first mask again, after all the others.
  EXPECT_EQ(mask(*layer, 1, random_pass_context(42, 2, 17, position)), base);
}

TEST(Dropout, BackwardMultipliesByTheSameMask) {
  const Index values = 50, batch = 3;
  auto layer = dropout(0.3, values);
  LayerHarness<double> h(*layer, batch);
  const Index positions[] = {9, 4, 100};
  const PassContext context = random_pass_context(5, 0, 1, positions);
  const std::vector<double> x = test_values(values * batch, 1);
  const std::vector<double> dy = test_values(values * batch, 2);
  const std::vector<double> y = h.forward(x, batch, context);
  const std::vector<double> dx = h.backward(x, y, dy, batch, context);
  const std::vector<double> m = mask(*layer, batch, context);
  for (size_t i = 0; i < dx.size(); ++i) {
    EXPECT_EQ(y[i], x[i] * m[i]) << i;
    EXPECT_EQ(dx[i], dy[i] * m[i]) << i;
  }
}

TEST(Dropout, GradientMatchesFiniteDifferences) {
  // The mask is a function of the context only, so every forward of the check draws the
  // same one: dx = dy * mask, exactly linear.
  auto layer = testing::layer<double>(R"({"type": "dropout", "p": 0.4})", {2, 5});
  const Index positions[] = {11, 3, 8};
  check_layer_gradients(*layer, 3, random_pass_context(8, 1, 3, positions));
}

TEST(Dropout, EvaluationAndPZeroAreTheIdentity) {
  const std::vector<double> x = test_values(40, 4);
  const std::vector<double> dy = test_values(40, 5);
  auto check = [&](Layer<double>& layer, const PassContext& context) {
    LayerHarness<double> h(layer, 4);
    const std::vector<double> y = h.forward(x, 4, context);
    EXPECT_EQ(y, x);
    EXPECT_EQ(h.backward(x, y, dy, 4, context), dy);
  };
  auto half = dropout(0.5, 10);
  check(*half, evaluation_context());
  auto none = dropout(0.0, 10);
  check(*none, random_pass_context());
  check(*none, evaluation_context());
}

TEST(Dropout, CounterOutOfRangeIsAnError) {
  auto layer = dropout(0.5, 4);
  LayerHarness<double> h(*layer, 1);
  EXPECT_THROW(h.forward({1, 2, 3, 4}, 1, random_pass_context(1, 0, int64_t{1} << 32)), Error);
  EXPECT_THROW(h.forward({1, 2, 3, 4}, 1, random_pass_context(1, -1, 1)), Error);
  const Index far[] = {Index{1} << 32};
  EXPECT_THROW(h.forward({1, 2, 3, 4}, 1, random_pass_context(1, 0, 1, far)), Error);
  const Index last[] = {(Index{1} << 32) - 1};
  EXPECT_NO_THROW(h.forward({1, 2, 3, 4}, 1, random_pass_context(1, 0, (int64_t{1} << 32) - 1, last)));
}

TEST(Dropout, ConfigErrorsNameTheKey) {
  const auto key = [](const char* json) {
    return test::config_error_key([&] { testing::specs(json); });
  };
  EXPECT_EQ(key(R"([{"type": "dropout", "p": 1}])"), "model.layers[0].p");
  EXPECT_EQ(key(R"([{"type": "dropout", "p": 1.5}])"), "model.layers[0].p");
  EXPECT_EQ(key(R"([{"type": "dropout", "p": -0.1}])"), "model.layers[0].p");
  EXPECT_EQ(key(R"([{"type": "dropout", "p": "half"}])"), "model.layers[0].p");
  EXPECT_EQ(key(R"([{"type": "dropout", "rate": 0.5}])"), "model.layers[0].rate");
  EXPECT_EQ(key(R"([{"type": "dropout", "p": 0}])"), "(no error)");
  EXPECT_EQ(key(R"([{"type": "dropout", "p": 0.999}])"), "(no error)");
  EXPECT_EQ(key(R"([{"type": "dropout"}])"), "(no error)");
}

}  // namespace
}  // namespace mpiddp::nn
