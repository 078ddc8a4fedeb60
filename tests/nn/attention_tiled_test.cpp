// attention's tiled algorithm (kernels/attention_tiled.cpp, FlashAttention's running softmax)
// against the naive one (kernels/attention_naive.cpp) that keeps the (T, T) probabilities: the
// same outputs, input gradients and parameter gradients to float rounding, causal and not,
// one head and several, T below, at and above the 64-position tile and not a multiple of it,
// with attention's dropout in training (both must drop the same probabilities); central
// differences in float64; a sample's bits do not follow its batch; its scratch is O(T). Both
// algorithms give the same bits on two compute threads as on one (the heads shared out).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/threads.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/nn/attention.hpp"
#include "../support/gradient_check.hpp"
#include "../support/layer_harness.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::check_layer_gradients;
using mpiddp::testing::layer;
using mpiddp::testing::LayerHarness;
using mpiddp::testing::random_pass_context;
using mpiddp::testing::test_values;

std::string attention_json(Index heads, bool causal, double dropout, const char* algorithm) {
  return R"({"type": "attention", "heads": )" + std::to_string(heads) + R"(, "causal": )" + (causal ? "true" : "false") +
         R"(, "dropout": )" + std::to_string(dropout) + R"(, "algorithm": ")" + algorithm + "\"}";
}

template <typename T>
std::vector<T> values(Index count, unsigned seed, double scale) {
  std::vector<T> out;
  for (const double v : test_values(count, seed)) out.push_back(static_cast<T>(v * scale));
  return out;
}

template <typename T>
struct Pass {
  std::vector<T> y, dx, grads;
};

// One training pass of the layer on fixed parameters, input and output gradient.
template <typename T>
Pass<T> pass(const std::string& json, const Shape& input, Index batch, const PassContext& context) {
  const auto attention = layer<T>(json.c_str(), input);
  LayerHarness<T> h(*attention, batch);
  h.set_parameters(values<T>(attention->parameter_count(), 1, 0.5));
  const std::vector<T> x = values<T>(attention->inputs() * batch, 2, 2.0);
  const std::vector<T> dy = values<T>(attention->outputs() * batch, 3, 1.0);
  Pass<T> out;
  out.y = h.forward(x, batch, context);
  out.dx = h.backward(x, out.y, dy, batch, context);
  out.grads = h.grads;
  return out;
}

// |a - b| <= tolerance (1 + |b|) everywhere; returns the largest |b| (so a vacuous
// comparison of zeros shows).
template <typename T>
double expect_close(const std::vector<T>& a, const std::vector<T>& b, double tolerance, const char* what) {
  EXPECT_EQ(a.size(), b.size()) << what;
  double largest = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_LE(std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])), tolerance * (1 + std::abs(static_cast<double>(b[i]))))
        << what << "[" << i << "]";
    largest = std::max(largest, std::abs(static_cast<double>(b[i])));
  }
  return largest;
}

template <typename T>
void expect_tiled_as_naive(double tolerance) {
  const Index positions_list[] = {5, 64, 150};  // below, at, and two and a third tiles
  for (const Index heads : {Index(1), Index(3)})
    for (const bool causal : {true, false})
      for (const Index t : positions_list)
        for (const double dropout : {0.0, 0.2}) {
          SCOPED_TRACE("heads " + std::to_string(heads) + (causal ? " causal" : " full") + " T " + std::to_string(t) +
                       " dropout " + std::to_string(dropout));
          const Shape input = {t, 12};
          const PassContext context = random_pass_context();
          const Pass<T> naive = pass<T>(attention_json(heads, causal, dropout, "naive"), input, 2, context);
          const Pass<T> tiled = pass<T>(attention_json(heads, causal, dropout, "tiled"), input, 2, context);
          EXPECT_GT(expect_close(tiled.y, naive.y, tolerance, "y"), 0.1);
          EXPECT_GT(expect_close(tiled.dx, naive.dx, tolerance, "dx"), 0.1);
          EXPECT_GT(expect_close(tiled.grads, naive.grads, tolerance, "grads"), 0.1);
        }
}

TEST(TiledAttention, AgreesWithTheNaiveFormInFloat64) { expect_tiled_as_naive<double>(1e-12); }

// float32: the two orders of summation and of normalising round apart by a few ulps of the
// sums they form (the gradients sum over up to B T = 300 positions).
TEST(TiledAttention, AgreesWithTheNaiveFormInFloat32) { expect_tiled_as_naive<float>(2e-5); }

// Keys in tiles of 64: T = 70 is one whole tile and a partial one, in both loops.
TEST(TiledAttention, GradientsMatchCentralDifferences) {
  for (const bool causal : {true, false})
    for (const double dropout : {0.0, 0.3}) {
      SCOPED_TRACE(std::string(causal ? "causal" : "full") + " dropout " + std::to_string(dropout));
      auto attention = layer<double>(attention_json(2, causal, dropout, "tiled").c_str(), {70, 4});
      check_layer_gradients(*attention, 2, random_pass_context());
    }
}

// Sample q alone, or at column 1 of three samples (positions 5, q, 9): the same bits, so
// N ranks holding a step's samples in any split compute each one as one process does.
TEST(TiledAttention, ASamplesBitsDoNotFollowItsBatch) {
  const Shape input = {100, 8};
  const auto attention = layer<float>(attention_json(2, true, 0.1, "tiled").c_str(), input);
  const Index values_per_sample = attention->inputs();
  LayerHarness<float> alone(*attention, 3);
  alone.set_parameters(values<float>(attention->parameter_count(), 1, 0.5));
  const std::vector<float> x3 = values<float>(3 * values_per_sample, 2, 2.0), dy3 = values<float>(3 * values_per_sample, 3, 1.0);
  const Index positions3[] = {5, 7, 9}, position1[] = {7};
  const std::vector<float> y3 = alone.forward(x3, 3, random_pass_context(42, 2, 17, positions3));
  const std::vector<float> dx3 = alone.backward(x3, y3, dy3, 3, random_pass_context(42, 2, 17, positions3));
  const std::vector<float> x1(x3.begin() + values_per_sample, x3.begin() + 2 * values_per_sample);
  const std::vector<float> dy1(dy3.begin() + values_per_sample, dy3.begin() + 2 * values_per_sample);
  const std::vector<float> y1 = alone.forward(x1, 1, random_pass_context(42, 2, 17, position1));
  const std::vector<float> dx1 = alone.backward(x1, y1, dy1, 1, random_pass_context(42, 2, 17, position1));
  EXPECT_TRUE(std::equal(y1.begin(), y1.end(), y3.begin() + values_per_sample));
  EXPECT_TRUE(std::equal(dx1.begin(), dx1.end(), dx3.begin() + values_per_sample));
}

// With two compute threads the batch's heads are shared out, each head computed whole by one
// thread on its own workspace: outputs, input and parameter gradients are the one thread's
// bits, for both algorithms, with dropout (its masks follow the head, not the thread) and
// without, the tiled form at T = 70 (a tile and a part). The projections' products stay on
// one thread here: a library's blocking, and so its bits, may follow its thread count.
TEST(AttentionThreads, TwoThreadsGiveTheBitsOfOne) {
  if (affinity_cores() < 2) GTEST_SKIP() << "one core: the heads cannot be shared out";
  kernels::use_one_thread_below(1e30);
  for (const char* algorithm : {"naive", "tiled"})
    for (const double dropout : {0.0, 0.2}) {
      SCOPED_TRACE(std::string(algorithm) + " dropout " + std::to_string(dropout));
      const std::string json = attention_json(3, true, dropout, algorithm);
      const PassContext context = random_pass_context();
      use_threads(1);
      const Pass<float> one = pass<float>(json, {70, 12}, 5, context);
      use_threads(2);
      const Pass<float> two = pass<float>(json, {70, 12}, 5, context);
      use_threads(1);
      EXPECT_EQ(one.y, two.y);
      EXPECT_EQ(one.dx, two.dx);
      EXPECT_EQ(one.grads, two.grads);
      EXPECT_GT(expect_close(two.grads, one.grads, 0.0, "grads"), 0.1);
    }
  kernels::use_one_thread_below(0);
}

// The naive form keeps (T, T) per head and sample, the tiled one (T): with B T fixed, its
// scratch stays the same from T = 64 to 1024 while the naive form's grows with T.
TEST(TiledAttention, ScratchIsLinearInT) {
  auto scratch = [](const char* algorithm, Index t) {
    return layer<float>(attention_json(4, true, 0.0, algorithm).c_str(), {t, 128})->scratch_bytes(4096 / t);
  };
  const double tiled64 = static_cast<double>(scratch("tiled", 64)), tiled1024 = static_cast<double>(scratch("tiled", 1024));
  EXPECT_LT(std::abs(tiled1024 - tiled64), 0.01 * tiled64);
  // The naive form's probabilities alone: 4 heads x 4096 positions x T values of 4 bytes.
  EXPECT_GE(static_cast<double>(scratch("naive", 1024)) - tiled1024, 4.0 * 4096 * 1024 * 4 * 0.99);
}

TEST(TiledAttention, AutoIsARuleOnTheLength) {
  EXPECT_EQ(attention_algorithm("naive", 4096), AttentionAlgorithm::kNaive);
  EXPECT_EQ(attention_algorithm("tiled", 8), AttentionAlgorithm::kTiled);
  EXPECT_EQ(attention_algorithm("auto", kTiledAttentionFrom - 1), AttentionAlgorithm::kNaive);
  EXPECT_EQ(attention_algorithm("auto", kTiledAttentionFrom), AttentionAlgorithm::kTiled);
}

TEST(TiledAttention, AnUnknownAlgorithmNamesTheKey) {
  try {
    layer<float>(R"({"type": "attention", "heads": 2, "algorithm": "flash"})", {8, 4});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers[0].algorithm: unknown value \"flash\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpiddp::nn
