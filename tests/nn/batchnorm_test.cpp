#include "mpiddp/nn/batchnorm.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "../support/config_errors.hpp"
#include "../support/layer_harness.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::check_layer_gradients;
using mpiddp::testing::LayerHarness;
using mpiddp::testing::test_values;

// Writes values into a bound vector (the harness's memory stays where the layer points).
template <typename T>
void overwrite(std::vector<T>& bound, std::initializer_list<T> values) {
  ASSERT_EQ(bound.size(), values.size());
  std::copy(values.begin(), values.end(), bound.begin());
}

void expect_near_all(const std::vector<double>& actual, const std::vector<double>& expected,
                     double tolerance, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tolerance * std::max(1.0, std::fabs(expected[i])))
        << what << "[" << i << "]";
}

TEST(BatchNorm, DeclaresPyTorchTensorsAndBuffers) {
  auto layer = testing::layer<double>(R"({"type": "batchnorm2d"})", {3, 4, 5});
  EXPECT_EQ(layer->type(), "batchnorm2d");
  EXPECT_EQ(layer->describe(), "batchnorm2d");
  EXPECT_EQ(layer->output_shape(), (Shape{3, 4, 5}));
  const auto params = layer->parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].name, "weight");
  EXPECT_EQ(params[0].shape, (Shape{3}));
  EXPECT_EQ(params[1].name, "bias");
  EXPECT_EQ(params[1].shape, (Shape{3}));
  const auto buffers = layer->buffers();
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_EQ(buffers[0].name, "running_mean");
  EXPECT_EQ(buffers[0].shape, (Shape{3}));
  EXPECT_EQ(buffers[0].type, BufferType::kReal);
  EXPECT_EQ(buffers[1].name, "running_var");
  EXPECT_EQ(buffers[1].type, BufferType::kReal);
  EXPECT_EQ(buffers[2].name, "num_batches_tracked");
  EXPECT_EQ(buffers[2].shape, Shape{});  // a scalar, as in PyTorch
  EXPECT_EQ(buffers[2].type, BufferType::kInt64);

  auto plain = testing::layer<float>(R"({"type": "batchnorm1d", "affine": false})", {6});
  EXPECT_EQ(plain->type(), "batchnorm1d");
  EXPECT_EQ(plain->describe(), "batchnorm1d_noaffine");
  EXPECT_TRUE(plain->parameters().empty());
  EXPECT_EQ(plain->buffers().size(), 3u);
}

TEST(BatchNorm, InitialisesAsPyTorch) {
  auto layer = testing::layer<double>(R"({"type": "batchnorm1d"})", {2, 5});
  LayerHarness<double> h(*layer, 1);
  std::fill(h.params.begin(), h.params.end(), 7.0);
  std::fill(h.buffers.begin(), h.buffers.end(), 7.0);
  h.counters[0] = 7;
  Rng rng(1);
  layer->initialize(rng);
  // Element by element: GCC 12.2 with AVX-512 (-march=native here) compiles the literal
  // std::vector<double>{1, 1, 0, 0} as {1, 1, 1, 1}, a broadcast of its low half.
  for (Index c = 0; c < 2; ++c) {
    EXPECT_EQ(h.params[c], 1.0);       // weight
    EXPECT_EQ(h.params[2 + c], 0.0);   // bias
    EXPECT_EQ(h.buffers[c], 0.0);      // running_mean
    EXPECT_EQ(h.buffers[2 + c], 1.0);  // running_var
  }
  EXPECT_EQ(h.counters[0], 0);
}

TEST(BatchNorm, TrainingHandValues) {
  // batchnorm1d over (2) with eps = 0.5, weight [2, -1], bias [0.5, 1], batch 4:
  //   channel 0: 1, 2, 3, 6   mean 3,  deviations -2 -1 0 3,  sum of squares 14, var 14/4 = 3.5
  //   channel 1: 6, 9, 11, 14 mean 10, deviations -4 -1 1 4,  sum of squares 34, var 34/4 = 8.5
  //   invstd = 1/sqrt(var + 0.5) = [1/2, 1/3]
  //   xhat0 = -1, -0.5, 0, 1.5;  y0 = 2 xhat0 + 0.5 = -1.5, -0.5, 0.5, 3.5
  //   xhat1 = -4/3, -1/3, 1/3, 4/3;  y1 = -xhat1 + 1 = 7/3, 4/3, 2/3, -1/3
  // Running statistics from 0 and 1 with momentum 0.1:
  //   mean 0.9 * 0 + 0.1 * [3, 10] = [0.3, 1]
  //   var  0.9 * 1 + 0.1 * [14/3, 34/3] (unbiased: N - 1 = 3) = [0.9 + 1.4/3, 0.9 + 3.4/3]
  auto layer = testing::layer<double>(R"({"type": "batchnorm1d", "eps": 0.5})", {2});
  LayerHarness<double> h(*layer, 4);
  Rng rng(1);
  layer->initialize(rng);
  h.set_parameters({2, -1, 0.5, 1});
  const std::vector<double> x = {1, 6, 2, 9, 3, 11, 6, 14};  // sample by sample
  const std::vector<double> y = h.forward(x, 4);
  expect_near_all(y, {-1.5, 7.0 / 3, -0.5, 4.0 / 3, 0.5, 2.0 / 3, 3.5, -1.0 / 3}, 1e-15, "y");
  expect_near_all(h.buffers, {0.3, 1.0, 0.9 + 1.4 / 3, 0.9 + 3.4 / 3}, 1e-15, "running");
  EXPECT_EQ(h.counters[0], 1);

  // dy: channel 0 = 1, 0, 0, 0; channel 1 = 0, 0, 0, 3. N = 4.
  //   channel 0: A = 1, Bsum = g.xhat = -1, weight * invstd = 1
  //     dx = g - 1/4 + xhat/4 = 0.5, -0.375, -0.25, 0.125;  dweight = -1, dbias = 1
  //   channel 1: A = 3, Bsum = 3 * 4/3 = 4, weight * invstd = -1/3
  //     dx = -1/3 (g - 3/4 - xhat) = -7/36, 5/36, 13/36, -11/36;  dweight = 4, dbias = 3
  const std::vector<double> dx = h.backward(x, y, {1, 0, 0, 0, 0, 0, 0, 3}, 4);
  expect_near_all(dx, {0.5, -7.0 / 36, -0.375, 5.0 / 36, -0.25, 13.0 / 36, 0.125, -11.0 / 36},
                  1e-15, "dx");
  expect_near_all(h.grads, {-1, 4, 1, 3}, 1e-15, "dparams");
  // Each dx sums to 0 over a channel: the batch mean takes out any shift.
}

TEST(BatchNorm, TrainingHandValues2dWithMomentumOne) {
  // batchnorm2d over (2, 1, 2), no affine, eps 1, momentum 1, batch 2: 4 values a channel.
  //   channel 0: 2, 6, 6, 6     mean 5,  deviations -3 1 1 1,  squares 12, var 3, invstd 1/2
  //   channel 1: -5, -1, -1, 3  mean -1, deviations -4 0 0 4,  squares 32, var 8, invstd 1/3
  //   y0 = -1.5, 0.5, 0.5, 0.5;  y1 = -4/3, 0, 0, 4/3
  //   momentum 1: running = the batch's: mean [5, -1], var unbiased [12/3, 32/3]
  // Sample 0 holds channel 0's first two values, then channel 1's: (C, H, W) row-major.
  auto layer = testing::layer<double>(
      R"({"type": "batchnorm2d", "affine": false, "eps": 1, "momentum": 1})", {2, 1, 2});
  LayerHarness<double> h(*layer, 2);
  // Any start: momentum 1 forgets it (and the shift K moves no result).
  overwrite(h.buffers, {0.25, -0.5, 1.0, 1.0});
  const std::vector<double> y = h.forward({2, 6, -5, -1, 6, 6, -1, 3}, 2);
  expect_near_all(y, {-1.5, 0.5, -4.0 / 3, 0, 0.5, 0.5, 0, 4.0 / 3}, 1e-15, "y");
  expect_near_all(h.buffers, {5, -1, 4, 32.0 / 3}, 1e-15, "running");
  EXPECT_EQ(h.counters[0], 1);
}

TEST(BatchNorm, EvaluationHandValues) {
  // running_mean [1, -2], running_var [3.5, 8.5], eps 0.5: invstd [1/2, 1/3].
  //   x = [3, 1]: xhat = [(3 - 1)/2, (1 + 2)/3] = [1, 1]; y = [2 * 1 + 0.5, -1 * 1 + 1] = [2.5, 0]
  //   dy = [1, 3]: dx = weight * invstd * dy = [1, -1]; dweight = dy xhat = [1, 3]; dbias = dy
  auto layer = testing::layer<double>(R"({"type": "batchnorm1d", "eps": 0.5})", {2});
  LayerHarness<double> h(*layer, 1);
  h.set_parameters({2, -1, 0.5, 1});
  overwrite(h.buffers, {1.0, -2.0, 3.5, 8.5});
  const PassContext eval = evaluation_context();
  const std::vector<double> y = h.forward({3, 1}, 1, eval);
  expect_near_all(y, {2.5, 0}, 1e-15, "y");
  const std::vector<double> dx = h.backward({3, 1}, y, {1, 3}, 1, eval);
  expect_near_all(dx, {1, -1}, 1e-15, "dx");
  expect_near_all(h.grads, {1, 3, 1, 3}, 1e-15, "dparams");
  // Evaluation changes no buffer.
  EXPECT_EQ(h.buffers, (std::vector<double>{1, -2, 3.5, 8.5}));
  EXPECT_EQ(h.counters[0], 0);
}

TEST(BatchNorm, OneValuePerChannelInTrainingIsAnErrorOnEveryRank) {
  auto layer = testing::layer<double>(R"({"type": "batchnorm2d"})", {2, 1, 1});
  LayerHarness<double> h(*layer, 1);
  try {
    h.forward({1, 2}, 1);
    FAIL() << "expected an Error";
  } catch (const ConfigError&) {
    FAIL() << "a run-time error, not a ConfigError";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitConfig);
    EXPECT_TRUE(e.on_every_rank());
    EXPECT_NE(std::string(e.what()).find("model.layers[0]: batchnorm2d over 1 value per channel"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(h.counters[0], 0);  // nothing moved
  // Evaluation needs no batch statistics.
  EXPECT_NO_THROW(h.forward({1, 2}, 1, evaluation_context()));
}

TEST(BatchNorm, WrongInputRankIsAConfigErrorOnTheLayer) {
  const auto key = [](const char* json, const Shape& shape) {
    return test::config_error_key([&] { testing::layer<double>(json, shape); });
  };
  EXPECT_EQ(key(R"({"type": "batchnorm2d"})", {4}), "model.layers[0]");
  EXPECT_EQ(key(R"({"type": "batchnorm2d"})", {2, 4}), "model.layers[0]");
  EXPECT_EQ(key(R"({"type": "batchnorm1d"})", {2, 3, 3}), "model.layers[0]");
  EXPECT_EQ(key(R"({"type": "batchnorm1d"})", {4}), "(no error)");
  EXPECT_EQ(key(R"({"type": "batchnorm1d"})", {2, 4}), "(no error)");
}

TEST(BatchNorm, ConfigErrorsNameTheKey) {
  const auto key = [](const std::string& json) {
    return test::config_error_key([&] { testing::specs(json.c_str()); });
  };
  for (const char* type : {"batchnorm1d", "batchnorm2d"}) {
    const std::string head = std::string(R"([{"type": ")") + type + "\", ";
    EXPECT_EQ(key(head + R"("momentum": 1.5}])"), "model.layers[0].momentum");
    EXPECT_EQ(key(head + R"("momentum": -0.1}])"), "model.layers[0].momentum");
    EXPECT_EQ(key(head + R"("momentum": "fast"}])"), "model.layers[0].momentum");
    EXPECT_EQ(key(head + R"("eps": 0}])"), "model.layers[0].eps");
    EXPECT_EQ(key(head + R"("eps": -1e-5}])"), "model.layers[0].eps");
    EXPECT_EQ(key(head + R"("eps": "small"}])"), "model.layers[0].eps");
    EXPECT_EQ(key(head + R"("affine": 1}])"), "model.layers[0].affine");
    EXPECT_EQ(key(head + R"("momentum": 0, "eps": 1e-3, "affine": false}])"), "(no error)");
    EXPECT_EQ(key(head + R"("momentum": 1}])"), "(no error)");
    EXPECT_EQ(key(head + R"("mommentum": 0.1}])"), "model.layers[0].mommentum");
  }
}

// Finite-difference checks of dx and dweight/dbias: training (batch statistics, so every
// dx depends on every value of its channel) and evaluation, 1d flat and sequence and 2d,
// with and without affine.
struct GradientCase {
  const char* json;
  Shape shape;
  bool training;
};

// How gtest names a case. Without it gtest prints the struct's bytes, padding included,
// which valgrind reports as reads of uninitialised memory.
void PrintTo(const GradientCase& c, std::ostream* os) {
  *os << c.json << " on " << shape_text(c.shape) << (c.training ? ", training" : ", evaluation");
}

class BatchNormGradientTest : public ::testing::TestWithParam<GradientCase> {};

TEST_P(BatchNormGradientTest, MatchesFiniteDifferences) {
  const GradientCase& c = GetParam();
  auto layer = testing::layer<double>(c.json, c.shape);
  const Index channels = c.shape[0];
  PassContext context;
  context.training = c.training;
  check_layer_gradients(*layer, 3, context, 2.0, [channels](LayerHarness<double>& h) {
    // weight in [0.5, 1) or (-1, -0.5]: away from 0, so that dx is not trivially 0.
    for (Index i = 0; i < channels && !h.params.empty(); ++i)
      h.params[i] = h.params[i] < 0 ? h.params[i] * 0.5 - 0.5 : h.params[i] * 0.5 + 0.5;
    // running_mean and a positive running_var, which evaluation normalises with.
    for (Index i = 0; i < channels; ++i) {
      h.buffers[i] = 0.1 * static_cast<double>(i) - 0.2;
      h.buffers[channels + i] = 0.5 + 0.25 * static_cast<double>(i);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    All, BatchNormGradientTest,
    ::testing::Values(GradientCase{R"({"type": "batchnorm1d"})", {4}, true},
                      GradientCase{R"({"type": "batchnorm1d"})", {4}, false},
                      GradientCase{R"({"type": "batchnorm1d", "affine": false})", {4}, true},
                      GradientCase{R"({"type": "batchnorm1d", "affine": false})", {4}, false},
                      GradientCase{R"({"type": "batchnorm1d"})", {2, 3}, true},
                      GradientCase{R"({"type": "batchnorm1d"})", {2, 3}, false},
                      GradientCase{R"({"type": "batchnorm1d", "affine": false})", {2, 3}, true},
                      GradientCase{R"({"type": "batchnorm2d"})", {2, 2, 3}, true},
                      GradientCase{R"({"type": "batchnorm2d"})", {2, 2, 3}, false},
                      GradientCase{R"({"type": "batchnorm2d", "affine": false})", {2, 2, 3}, true},
                      GradientCase{R"({"type": "batchnorm2d", "affine": false})", {2, 2, 3}, false},
                      GradientCase{R"({"type": "batchnorm2d", "eps": 0.1, "momentum": 0.5})",
                                   {3, 1, 2}, true}));

// Two "ranks" in two threads: each sum() waits for the other's call and hands both the
// element-wise sum, added in the same order on both so that they get identical bits, as
// an allreduce does.
class TwoRankRendezvous {
 public:
  class Rank final : public StatisticsReducer {
   public:
    Rank(TwoRankRendezvous& owner, int rank) : owner_(owner), rank_(rank) {}
    void sum(double* values, size_t count) override { owner_.exchange(rank_, values, count); }
    int calls = 0;

   private:
    TwoRankRendezvous& owner_;
    int rank_;
  };

  void exchange(int rank, double* values, size_t count) {
    std::unique_lock lock(mutex_);
    const int64_t round = round_;
    values_[rank] = values;
    counts_[rank] = count;
    if (++arrived_ == 2) {
      if (counts_[0] != counts_[1]) throw std::logic_error("the ranks' counts differ");
      for (size_t i = 0; i < count; ++i) {
        const double total = values_[0][i] + values_[1][i];
        values_[0][i] = values_[1][i] = total;
      }
      arrived_ = 0;
      ++round_;
      changed_.notify_all();
      return;
    }
    if (!changed_.wait_for(lock, std::chrono::seconds(30), [&] { return round_ != round; }))
      throw std::runtime_error("the other rank never called sum");
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  double* values_[2] = {nullptr, nullptr};
  size_t counts_[2] = {0, 0};
  int arrived_ = 0;
  int64_t round_ = 0;
};

std::vector<double> columns(const std::vector<double>& all, Index rows, Index begin, Index end) {
  return {all.begin() + begin * rows, all.begin() + end * rows};
}

TEST(BatchNorm, TwoHalvesWithSummedStatisticsEqualTheWholeBatch) {
  // The world-size equivalence in miniature: one layer over 6 samples, and two layers over
  // samples 0-2 and 3-5 whose statistics meet in a reducer, give the same y, running
  // statistics and dx. Each half's dy is twice the whole's, as each rank's mean loss over
  // half the batch is; the halves' dx are then twice the whole's and the mean of their
  // parameter gradients is the whole's (Note [batch statistics over the ranks]).
  const char* json = R"({"type": "batchnorm2d", "momentum": 0.3})";
  const Shape shape = {2, 2, 3};
  const Index batch = 6, half = 3, rows = 12;
  const std::vector<double> x = test_values(rows * batch, 5);
  const std::vector<double> dy = test_values(rows * batch, 6);
  auto prepare = [](LayerHarness<double>& h) {
    h.set_parameters({0.7, -1.2, 0.1, 0.4});
    overwrite(h.buffers, {0.2, -0.3, 1.5, 0.8});
    overwrite(h.counters, {int64_t{4}});
  };

  auto whole_layer = testing::layer<double>(json, shape);
  LayerHarness<double> whole(*whole_layer, batch);
  prepare(whole);
  const std::vector<double> y = whole.forward(x, batch);
  const std::vector<double> dx = whole.backward(x, y, dy, batch);

  TwoRankRendezvous rendezvous;
  struct Half {
    std::unique_ptr<Layer<double>> layer;
    std::unique_ptr<LayerHarness<double>> h;
    std::unique_ptr<TwoRankRendezvous::Rank> reducer;
    std::vector<double> y, dx;
  } halves[2];
  for (int r = 0; r < 2; ++r) {
    halves[r].layer = testing::layer<double>(json, shape);
    halves[r].h = std::make_unique<LayerHarness<double>>(*halves[r].layer, half);
    prepare(*halves[r].h);
    halves[r].reducer = std::make_unique<TwoRankRendezvous::Rank>(rendezvous, r);
  }
  auto run = [&](int r) {
    Half& me = halves[r];
    PassContext context;
    context.statistics = me.reducer.get();
    const std::vector<double> my_x = columns(x, rows, r * half, (r + 1) * half);
    std::vector<double> my_dy = columns(dy, rows, r * half, (r + 1) * half);
    for (double& v : my_dy) v *= 2.0;
    me.y = me.h->forward(my_x, half, context);
    me.dx = me.h->backward(my_x, me.y, my_dy, half, context);
  };
  std::thread other(run, 1);
  run(0);
  other.join();

  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("half " + std::to_string(r));
    expect_near_all(halves[r].y, columns(y, rows, r * half, (r + 1) * half), 1e-12, "y");
    std::vector<double> twice = columns(dx, rows, r * half, (r + 1) * half);
    for (double& v : twice) v *= 2.0;
    expect_near_all(halves[r].dx, twice, 1e-12, "dx");
    expect_near_all(halves[r].h->buffers, whole.buffers, 1e-12, "running statistics");
    EXPECT_EQ(halves[r].h->counters[0], 5);
  }
  // What the gradient reducer does: the mean over the ranks.
  std::vector<double> mean_grads(whole.grads.size());
  for (size_t i = 0; i < mean_grads.size(); ++i)
    mean_grads[i] = (halves[0].h->grads[i] + halves[1].h->grads[i]) / 2;
  expect_near_all(mean_grads, whole.grads, 1e-12, "mean of the halves' parameter gradients");
}

// The reducer's calls: one per training forward (3C values), one per training backward
// with dx (2C), none in evaluation or without dx. The trainer wires exactly this.
class CountingReducer final : public StatisticsReducer {
 public:
  void sum(double*, size_t count) override { counts.push_back(count); }
  std::vector<size_t> counts;
};

TEST(BatchNorm, CallsTheReducerOncePerTrainingPass) {
  auto layer = testing::layer<double>(R"({"type": "batchnorm2d"})", {3, 2, 2});
  LayerHarness<double> h(*layer, 2);
  Rng rng(1);
  layer->initialize(rng);
  CountingReducer reducer;
  PassContext training;
  training.statistics = &reducer;
  const std::vector<double> x = test_values(24, 1);
  const std::vector<double> y = h.forward(x, 2, training);
  h.backward(x, y, x, 2, training);
  EXPECT_EQ(reducer.counts, (std::vector<size_t>{9, 6}));
  layer->backward(training, ConstMatrixView<double>(x.data(), 12, 2),
                  ConstMatrixView<double>(y.data(), 12, 2), ConstMatrixView<double>(x.data(), 12, 2),
                  nullptr);
  EXPECT_EQ(reducer.counts.size(), 2u);  // no dx: no sum
  PassContext eval = evaluation_context();
  eval.statistics = &reducer;
  h.backward(x, h.forward(x, 2, eval), x, 2, eval);
  EXPECT_EQ(reducer.counts.size(), 2u);
}

TEST(BatchNorm, ShiftedSumsKeepPrecisionForALargeOffset) {
  // float32 values 1e4 + noise of about 0.06 (standard deviation), 2048 per channel. The
  // plain one-pass formula E[x^2] - E[x]^2 subtracts two numbers of 1e8 to get 4e-3; the
  // shift K = running_mean (here as after some training, 0.05 from the data's mean) keeps
  // x - K small and the variance exact to about 1e-12 relative in double. Momentum 1 makes
  // the running variance the batch's unbiased one (rounded to float: 6e-8 relative).
  auto layer = testing::layer<float>(R"({"type": "batchnorm2d", "momentum": 1})", {1, 16, 16});
  const Index batch = 8, count = 256 * batch;
  LayerHarness<float> h(*layer, batch);
  h.set_parameters({1.0f, 0.0f});
  overwrite(h.buffers, {1e4f + 0.05f, 0.0f});
  std::vector<float> x(static_cast<size_t>(count));
  const std::vector<double> noise = test_values(count, 9);
  for (Index i = 0; i < count; ++i) x[i] = static_cast<float>(1e4 + 0.1 * noise[i]);
  const std::vector<float> y = h.forward(x, batch);

  // The two-pass reference in long double, over the same float values.
  long double sum = 0, squares = 0;
  for (float v : x) sum += v;
  const long double mean = sum / count;
  for (float v : x) squares += (v - mean) * (v - mean);
  const long double var = squares / count;
  const double unbiased = static_cast<double>(squares / (count - 1));
  EXPECT_NEAR(h.buffers[1], unbiased, 1e-6 * unbiased);
  EXPECT_NEAR(h.buffers[0], static_cast<double>(mean), 1e-3);  // float at 1e4: ulp 1e-3
  const long double invstd = 1.0L / std::sqrt(var + 1e-5L);
  for (Index i = 0; i < count; ++i)
    ASSERT_NEAR(y[i], static_cast<double>((x[i] - mean) * invstd), 1e-5) << i;
}

// Both new layers inside a model: the tensors' and buffers' names as a PyTorch state_dict
// has them, the buffers' start values, and the network's gradient in a training pass (the
// dropout mask is fixed by the context, so every pass of the check draws the same one).
TEST(BatchNorm, InAModelWithDropout) {
  const auto specs = testing::specs(R"([
      {"type": "linear", "out": 4}, {"type": "batchnorm1d"}, {"type": "tanh"},
      {"type": "dropout", "p": 0.25}, {"type": "linear", "out": 2},
      {"type": "batchnorm1d", "affine": false}])");
  const Index batch = 5;
  Model<double> model({3}, specs, batch);
  EXPECT_EQ(model.describe(), "3-linear4-batchnorm1d-tanh-dropout-linear2-batchnorm1d_noaffine");
  // (3*4+4) + (4+4) + (4*2+2)
  EXPECT_EQ(model.parameter_count(), 34);
  ASSERT_EQ(model.tensors().size(), 6u);
  EXPECT_EQ(model.tensors()[2].name, "1.weight");
  EXPECT_EQ(model.tensors()[3].name, "1.bias");
  const auto& buffers = model.buffer_tensors();
  ASSERT_EQ(buffers.size(), 6u);
  EXPECT_EQ(buffers[0].name, "1.running_mean");
  EXPECT_EQ(buffers[1].name, "1.running_var");
  EXPECT_EQ(buffers[2].name, "1.num_batches_tracked");
  EXPECT_EQ(buffers[2].type, BufferType::kInt64);
  EXPECT_EQ(buffers[5].name, "5.num_batches_tracked");
  ASSERT_EQ(model.buffer_value_count(), 12);
  ASSERT_EQ(model.buffer_counter_count(), 2);
  model.initialize(3);
  for (Index i = 0; i < 4; ++i) {
    EXPECT_EQ(model.buffer_values()[i], 0.0);      // 1.running_mean
    EXPECT_EQ(model.buffer_values()[4 + i], 1.0);  // 1.running_var
  }

  const Index positions[] = {4, 0, 3, 1, 2};
  PassContext context;
  context.positions = positions;
  context.seed = 9;
  context.step = 2;
  EXPECT_GT(mpiddp::testing::check_model_gradients(model, batch, context, [&] {
              EXPECT_EQ(model.buffer_counters()[0], 1);
              EXPECT_EQ(model.buffer_counters()[1], 1);
            }),
            1e-3);
}

// Golden values from PyTorch (tools/golden/batchnorm.py): one step of each case, float64.
TEST(BatchNorm, MatchesPyTorch) {
  const std::string path = std::string(MPIDDP_SOURCE_DIR) + "/tests/golden/batchnorm.json";
  std::ifstream file(path);
  ASSERT_TRUE(file) << "cannot read " << path;
  const io::Json golden = io::Json::parse(file);
  ASSERT_GE(golden["cases"].size(), 8u);
  for (const io::Json& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const Shape shape = c["input_shape"].get<Shape>();
    const Index batch = c["batch"].get<Index>();
    auto layer = testing::layer<double>(c["layer"].dump().c_str(), shape);
    LayerHarness<double> h(*layer, batch);
    std::vector<double> params = c["weight"].get<std::vector<double>>();
    for (double b : c["bias"].get<std::vector<double>>()) params.push_back(b);
    h.set_parameters(params);
    std::vector<double> buffers = c["running_mean_before"].get<std::vector<double>>();
    for (double v : c["running_var_before"].get<std::vector<double>>()) buffers.push_back(v);
    ASSERT_EQ(buffers.size(), h.buffers.size());
    std::copy(buffers.begin(), buffers.end(), h.buffers.begin());
    PassContext context;
    context.training = c["training"].get<bool>();
    const auto x = c["x"].get<std::vector<double>>();
    const auto y = h.forward(x, batch, context);
    const auto dx = h.backward(x, y, c["dy"].get<std::vector<double>>(), batch, context);
    expect_near_all(y, c["y"].get<std::vector<double>>(), 1e-12, "y");
    expect_near_all(dx, c["dx"].get<std::vector<double>>(), 1e-12, "dx");
    std::vector<double> grads = c["dweight"].get<std::vector<double>>();
    for (double b : c["dbias"].get<std::vector<double>>()) grads.push_back(b);
    expect_near_all(h.grads, grads, 1e-12, "dweight, dbias");
    std::vector<double> running = c["running_mean"].get<std::vector<double>>();
    for (double v : c["running_var"].get<std::vector<double>>()) running.push_back(v);
    expect_near_all(h.buffers, running, 1e-12, "running_mean, running_var");
    EXPECT_EQ(h.counters[0], c["num_batches_tracked"].get<int64_t>());
  }
}

}  // namespace
}  // namespace mpiddp::nn
