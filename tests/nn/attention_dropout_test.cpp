// attention's own dropout ("dropout": p on the probabilities, nanoGPT's attn_dropout; masks
// from nn/dropout_mask.hpp). In evaluation the layer is the one without dropout; in training
// a sample's output is a function of its global position, the seed, the step and the epoch
// only (not of the batch around it nor of its column), its masks follow Note [the dropout
// counter] value by value, about p of the probabilities are dropped, and the input and
// parameter gradients match central differences in float64 (the masks are a pure function
// of the pass context, so every forward of the check draws the same ones).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mpiddp/core/hash.hpp"
#include "mpiddp/core/philox.hpp"
#include "mpiddp/core/rng.hpp"
#include "mpiddp/core/threads.hpp"
#include "../support/gradient_check.hpp"
#include "../support/layer_harness.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::check_layer_gradients;
using mpiddp::testing::layer;
using mpiddp::testing::LayerHarness;
using mpiddp::testing::test_values;

constexpr const char* kDropping = R"({"type": "attention", "heads": 2, "dropout": 0.25})";
constexpr const char* kKeeping = R"({"type": "attention", "heads": 2})";
const Shape kInput = {4, 6};  // T = 4 positions of C = 6, two heads of 3
constexpr Index kValues = 24;

using testing::random_pass_context;

// Sample b's column of a (kValues, batch) output.
std::vector<double> column(const std::vector<double>& y, Index b) {
  return {y.begin() + b * kValues, y.begin() + (b + 1) * kValues};
}

TEST(AttentionDropout, InEvaluationItIsTheLayerWithoutDropout) {
  auto dropping = layer<double>(kDropping, kInput), keeping = layer<double>(kKeeping, kInput);
  // One (T, T) more of scratch per worker thread (one per core, at most one per head of the
  // batch): the mask of one head, drawn again in backward.
  const Index workers = std::min<Index>(affinity_cores(), 2 * 3);
  EXPECT_EQ(dropping->scratch_bytes(3), keeping->scratch_bytes(3) + workers * scratch_values_bytes<double>(16));
  LayerHarness<double> hd(*dropping, 3), hk(*keeping, 3);
  const std::vector<double> params = test_values(dropping->parameter_count(), 1);
  hd.set_parameters(params);
  hk.set_parameters(params);
  const std::vector<double> x = test_values(kValues * 3, 2), dy = test_values(kValues * 3, 3);
  const PassContext evaluation = evaluation_context();
  const std::vector<double> yd = hd.forward(x, 3, evaluation), yk = hk.forward(x, 3, evaluation);
  EXPECT_EQ(yd, yk);
  EXPECT_EQ(hd.backward(x, yd, dy, 3, evaluation), hk.backward(x, yk, dy, 3, evaluation));
  EXPECT_EQ(hd.grads, hk.grads);
  // In training it is not: some probabilities are dropped.
  EXPECT_NE(hd.forward(x, 3, random_pass_context(1, 0, 1, nullptr)), yk);
  // Nor is "dropout": 0 in training anything but the layer without it.
  auto zero = layer<double>(R"({"type": "attention", "heads": 2, "dropout": 0})", kInput);
  LayerHarness<double> hz(*zero, 3);
  hz.set_parameters(params);
  EXPECT_EQ(hz.forward(x, 3, random_pass_context(1, 0, 1, nullptr)), yk);
}

// The largest |a[i] - b[i]|.
double largest_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double largest = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) largest = std::max(largest, std::fabs(a[i] - b[i]));
  return largest;
}

// Sample b of (kValues, batch) values written into column `at` of another batch.
void put_column(std::vector<double>& into, Index at, const std::vector<double>& sample) {
  std::copy(sample.begin(), sample.end(), into.begin() + at * kValues);
}

TEST(AttentionDropout, ASamplesOutputFollowsItsPositionNotItsBatchOrColumn) {
  auto attention = layer<double>(kDropping, kInput);
  LayerHarness<double> h(*attention, 3);
  h.set_parameters(test_values(attention->parameter_count(), 4));
  const std::vector<double> x = test_values(kValues * 3, 5), dy = test_values(kValues * 3, 6);
  const Index positions[] = {5, 0, 9};
  const PassContext context = random_pass_context(11, 1, 3, positions);
  const std::vector<double> y = h.forward(x, 3, context);
  const std::vector<double> dx = h.backward(x, y, dy, 3, context);
  for (Index b = 0; b < 3; ++b) {
    SCOPED_TRACE("sample " + std::to_string(b));
    const std::vector<double> xb = column(x, b), dyb = column(dy, b);
    // In column `at` of a batch of 3 other samples at other positions: the same bits,
    // forward and backward (at one batch size the products are blocked alike, column by column).
    for (Index at = 0; at < 3; ++at) {
      std::vector<double> xs = test_values(kValues * 3, 9), dys = test_values(kValues * 3, 10);
      put_column(xs, at, xb);
      put_column(dys, at, dyb);
      Index strangers[] = {20, 21, 22};
      strangers[at] = positions[b];
      const PassContext among = random_pass_context(11, 1, 3, strangers);
      const std::vector<double> ys = h.forward(xs, 3, among);
      EXPECT_EQ(column(ys, at), column(y, b)) << "in column " << at;
      EXPECT_EQ(column(h.backward(xs, ys, dys, 3, among), at), column(dx, b)) << "in column " << at;
    }
    // Alone, a batch of one at the same position: the same to the last bits. The products of
    // 4 columns rather than 12 are blocked otherwise and may round otherwise (the layer without
    // dropout does, in evaluation too); a mask of another position changes the output by O(1).
    const PassContext alone = random_pass_context(11, 1, 3, positions + b);
    const std::vector<double> yb = h.forward(xb, 1, alone);
    EXPECT_LT(largest_difference(yb, column(y, b)), 1e-14);
    EXPECT_LT(largest_difference(h.backward(xb, yb, dyb, 1, alone), column(dx, b)), 1e-14);
    const Index elsewhere[] = {positions[b] + 1};
    EXPECT_GT(largest_difference(h.forward(xb, 1, random_pass_context(11, 1, 3, elsewhere)), column(y, b)), 1e-2);
  }
  // Null positions are the columns: positions 0, 1, 2.
  const Index in_order[] = {0, 1, 2};
  EXPECT_EQ(h.forward(x, 3, random_pass_context(11, 1, 3, nullptr)), h.forward(x, 3, random_pass_context(11, 1, 3, in_order)));
}

TEST(AttentionDropout, AnotherStepEpochSeedOrPositionDrawsAnotherMask) {
  auto attention = layer<double>(kDropping, kInput);
  LayerHarness<double> h(*attention, 1);
  h.set_parameters(test_values(attention->parameter_count(), 7));
  const std::vector<double> x = test_values(kValues, 8);
  const Index at[] = {4}, elsewhere[] = {5};
  const std::vector<double> base = h.forward(x, 1, random_pass_context(3, 2, 17, at));
  EXPECT_NE(h.forward(x, 1, random_pass_context(3, 2, 18, at)), base);
  EXPECT_NE(h.forward(x, 1, random_pass_context(3, 3, 17, at)), base);
  EXPECT_NE(h.forward(x, 1, random_pass_context(4, 2, 17, at)), base);
  EXPECT_NE(h.forward(x, 1, random_pass_context(3, 2, 17, elsewhere)), base);
  EXPECT_EQ(h.forward(x, 1, random_pass_context(3, 2, 17, at)), base);  // no state: the first mask again
}

// Note [the dropout counter] with attention's numbering: the probability of key j at query i
// in head h is value (h T + i) T + j of its sample. Made visible: q = k = 0, so every
// probability of a non-causal head is 1/T; v = x with x_t = e_t + e_{T+t} (one-hot in each
// head's T dimensions) and c_proj the identity, so output (t, h T + j) of a sample is
// P(j, t) M_h(j, t) = M_h(j, t) / T exactly: 0 where dropped, (1 / (1 - p)) / T where kept.
constexpr Index kT = 8, kC = 16;  // two heads of width T

constexpr const char* kRevealing = R"({"type": "attention", "heads": 2, "causal": false, "dropout": 0.25})";

struct MaskRevealing {
  explicit MaskRevealing(Index batch) : attention(layer<double>(kRevealing, {kT, kC})), harness(*attention, batch) {
    std::vector<double> p(static_cast<size_t>(attention->parameter_count()), 0.0);
    for (Index c = 0; c < kC; ++c) {
      p[(2 * kC + c) * kC + c] = 1;              // c_attn.weight's v rows [2C, 3C): the identity
      p[3 * kC * kC + 3 * kC + c * kC + c] = 1;  // c_proj.weight: the identity
    }
    harness.set_parameters(p);
  }
  std::unique_ptr<Layer<double>> attention;
  LayerHarness<double> harness;
};

std::vector<double> one_hot_inputs(Index batch) {
  std::vector<double> x(static_cast<size_t>(kT * kC * batch), 0.0);
  for (Index b = 0; b < batch; ++b)
    for (Index t = 0; t < kT; ++t) {
      x[b * kT * kC + t * kC + t] = 1;
      x[b * kT * kC + t * kC + kT + t] = 1;
    }
  return x;
}

TEST(AttentionDropout, MasksFollowTheDocumentedCounter) {
  const Index batch = 4;
  MaskRevealing revealing(batch);
  const Index positions[] = {3, 70000, 12, 0};
  const std::vector<double> y = revealing.harness.forward(one_hot_inputs(batch), batch, random_pass_context(99, 4, 123456, positions));
  const uint64_t seed = mix_seed(99, fnv1a("model.layers[0]"));
  const PhiloxKey key = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  const double kept = (1.0 / (1.0 - 0.25)) / kT;
  int dropped_count = 0;
  for (Index b = 0; b < batch; ++b)
    for (Index head = 0; head < 2; ++head)
      for (Index i = 0; i < kT; ++i)
        for (Index j = 0; j < kT; ++j) {
          const Index value = (head * kT + i) * kT + j;
          const PhiloxCounter words = philox4x32_10(
              {static_cast<uint32_t>(value / 4), static_cast<uint32_t>(positions[b]), 123456, 4}, key);
          const bool dropped = words[static_cast<size_t>(value % 4)] * 0x1p-32 < 0.25;
          dropped_count += dropped;
          ASSERT_EQ(y[b * kT * kC + i * kC + head * kT + j], dropped ? 0.0 : kept)
              << "sample " << b << ", head " << head << ", query " << i << ", key " << j;
        }
  EXPECT_GT(dropped_count, 0);
}

TEST(AttentionDropout, DropsAboutAQuarterOfTheProbabilities) {
  // 256 samples of 2 heads of 8 x 8 probabilities: n = 32768 Bernoulli(0.25) drops, whose
  // count has standard deviation sqrt(n 0.25 0.75) = 78; the bound is 5 of them.
  const Index batch = 256;
  MaskRevealing revealing(batch);
  const std::vector<double> y = revealing.harness.forward(one_hot_inputs(batch), batch, random_pass_context(5, 0, 1, nullptr));
  const double kept = (1.0 / (1.0 - 0.25)) / kT;
  double dropped = 0;
  for (const double v : y) {
    ASSERT_TRUE(v == 0.0 || v == kept) << v;
    dropped += v == 0.0;
  }
  const double n = static_cast<double>(y.size());
  EXPECT_NEAR(dropped, 0.25 * n, 5 * std::sqrt(n * 0.25 * 0.75));
}

TEST(AttentionDropout, GradientsInTrainingMatchCentralDifferences) {
  const Index positions[] = {7, 2, 30};
  const PassContext context = random_pass_context(21, 1, 5, positions);
  for (const char* json : {kDropping, R"({"type": "attention", "heads": 1, "causal": false, "dropout": 0.25})",
                           R"({"type": "attention", "heads": 3, "bias": false, "dropout": 0.5})"}) {
    SCOPED_TRACE(json);
    auto attention = layer<double>(json, kInput);
    check_layer_gradients(*attention, 3, context);
    // The masks drop something here: training is not evaluation.
    LayerHarness<double> h(*attention, 3);
    h.set_parameters(test_values(attention->parameter_count(), 1));
    const std::vector<double> x = test_values(kValues * 3, 2);
    EXPECT_NE(h.forward(x, 3, context), h.forward(x, 3, evaluation_context()));
  }
}

}  // namespace
}  // namespace mpiddp::nn
