#include "mpiddp/nn/model.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "../support/layer_harness.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/nn/loss.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::expect_gradient_matches;
using mpiddp::testing::test_values;

const std::vector<LayerSpec> kSpecs = mpiddp::testing::specs(R"([
    {"type": "linear", "out": 5}, {"type": "tanh"}, {"type": "linear", "out": 4}, {"type": "gelu"},
    {"type": "linear", "out": 3}, {"type": "sigmoid"}, {"type": "linear", "out": 2}])");
const Shape kInput = {3};

TEST(Model, LayoutAndNames) {
  Model<float> model(kInput, kSpecs, 8);
  // (3*5+5) + (5*4+4) + (4*3+3) + (3*2+2) = 20 + 24 + 15 + 8
  EXPECT_EQ(model.parameter_count(), 67);
  EXPECT_EQ(model.describe(), "3-linear5-tanh-linear4-gelu-linear3-sigmoid-linear2");
  const auto& t = model.tensors();
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t[0].name, "0.weight");
  EXPECT_EQ(t[0].shape, (std::vector<Index>{5, 3}));
  EXPECT_EQ(t[1].name, "0.bias");
  EXPECT_EQ(t[1].offset, 15);
  EXPECT_EQ(t[2].name, "2.weight");
  EXPECT_EQ(t[2].offset, 20);
  EXPECT_EQ(t[7].name, "6.bias");
  EXPECT_EQ(t[7].offset + t[7].size(), model.parameter_count());
}

TEST(Model, UnknownLayerNamesTheKey) {
  try {
    mpiddp::testing::specs(R"([{"type": "linear", "out": 2}, {"type": "softplus"}])");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "model.layers[1].type");
  }
}

TEST(Model, SameSeedSameWeights) {
  Model<float> a(kInput, kSpecs, 4), b(kInput, kSpecs, 4), c(kInput, kSpecs, 4);
  a.initialize(11);
  b.initialize(11);
  c.initialize(12);
  EXPECT_TRUE(std::equal(a.parameters(), a.parameters() + a.parameter_count(), b.parameters()));
  EXPECT_FALSE(std::equal(a.parameters(), a.parameters() + a.parameter_count(), c.parameters()));
}

TEST(Model, NetworkGradientMatchesFiniteDifferences) {
  const Index batch = 4;
  Model<double> model(kInput, kSpecs, batch);
  model.initialize(3);
  EXPECT_GT(mpiddp::testing::check_model_gradients(model, batch), 1e-3);
}

TEST(Model, BoundGradientViewsReceiveBackwardAndTheBufferStays) {
  // bind_gradient_views(memory): backward adds into memory, gradients() keeps naming the
  // model's buffer, which is not touched; null points the views back at it.
  const Index batch = 4;
  Model<float> model(kInput, kSpecs, batch, 1);
  model.initialize(5);
  const size_t p = static_cast<size_t>(model.parameter_count());
  const std::vector<double> xd = test_values(3 * batch, 1), td = test_values(2 * batch, 2);
  std::vector<float> x(xd.begin(), xd.end()), t(td.begin(), td.end());
  MseLoss<float> mse;
  auto pass = [&] {
    const auto out = model.forward(ConstMatrixView<float>(x.data(), 3, batch));
    mse.forward_backward(out, {t.data(), nullptr}, model.output_gradient());
    model.backward(ConstMatrixView<float>(x.data(), 3, batch));
  };
  model.zero_gradients();
  pass();
  const std::vector<float> expected(model.gradients(), model.gradients() + p);
  ASSERT_NE(expected[0], 0.0f);
  model.zero_gradients();
  constexpr size_t kGuard = 16;  // 64 bytes: aligned as the model's own buffer is
  AlignedVector<float> memory(p + 2 * kGuard, -1.0f);
  std::fill_n(memory.data() + kGuard, p, 0.0f);
  model.bind_gradient_views(memory.data() + kGuard);
  pass();
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), memory.data() + kGuard));
  EXPECT_EQ(memory[kGuard - 1], -1.0f);  // nothing written outside the p values
  EXPECT_EQ(memory[kGuard + p], -1.0f);
  EXPECT_TRUE(std::all_of(model.gradients(), model.gradients() + p, [](float g) { return g == 0.0f; }));
  model.bind_gradient_views(nullptr);
  pass();
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), model.gradients()));
}

TEST(Model, PlacedGradientsMoveWithTheirContentsAndReceiveBackward) {
  const Index batch = 4;
  Model<float> own(kInput, kSpecs, batch, 1), placed(kInput, kSpecs, batch, 1);
  own.initialize(5);
  placed.initialize(5);
  EXPECT_EQ(placed.gradient_count(), placed.parameter_count() + 1);
  placed.gradients()[placed.parameter_count()] = 7.0f;  // the reserved slot's contents move too
  // 16 guard floats on either side keep the placed buffer 64-byte aligned like the model's
  // own: Eigen rounds an unaligned head of a reduction differently (see mpi_shared_memory_sum.cpp).
  constexpr size_t kGuard = 16;
  AlignedVector<float> memory(static_cast<size_t>(placed.gradient_count()) + 2 * kGuard, -1.0f);
  placed.place_gradients(memory.data() + kGuard);
  EXPECT_EQ(placed.gradients(), memory.data() + kGuard);
  EXPECT_EQ(memory[static_cast<size_t>(placed.parameter_count()) + kGuard], 7.0f);
  const std::vector<double> xd = test_values(3 * batch, 1), td = test_values(2 * batch, 2);
  std::vector<float> x(xd.begin(), xd.end()), t(td.begin(), td.end());
  MseLoss<float> mse;
  for (Model<float>* model : {&own, &placed}) {
    model->zero_gradients();
    const auto out = model->forward(ConstMatrixView<float>(x.data(), 3, batch));
    mse.forward_backward(out, {t.data(), nullptr}, model->output_gradient());
    model->backward(ConstMatrixView<float>(x.data(), 3, batch));
  }
  EXPECT_TRUE(std::equal(own.gradients(), own.gradients() + own.parameter_count(),
                         memory.data() + kGuard));
  EXPECT_EQ(memory[kGuard - 1], -1.0f);  // nothing written outside the placed buffer
  EXPECT_EQ(memory[memory.size() - kGuard], -1.0f);
  EXPECT_NE(own.gradients()[0], 0.0f);
}

// Note [gradients written, not cleared]: a pass with overwrite_gradients over last step's
// gradients must give what a pass adding onto cleared ones gives: the linear layers write
// theirs, and the batchnorm's (which only adds), the residual holding it and the reserved
// slots are cleared by prepare_gradient_overwrite.
TEST(Model, AnOverwritingPassGivesTheClearedPassGradientsOverStaleOnes) {
  const Index batch = 4;
  const std::vector<LayerSpec> specs = mpiddp::testing::specs(R"([
      {"type": "linear", "out": 4}, {"type": "tanh"},
      {"type": "residual", "layers": [{"type": "linear", "out": 4}, {"type": "batchnorm1d"}]},
      {"type": "residual", "layers": [{"type": "linear", "out": 4}, {"type": "relu"}]},
      {"type": "batchnorm1d"}, {"type": "linear", "out": 2}])");
  Model<double> model(kInput, specs, batch, 2);
  model.initialize(9);
  const size_t count = static_cast<size_t>(model.gradient_count());
  const std::vector<double> x = test_values(3 * batch, 1), t = test_values(2 * batch, 2);
  MseLoss<double> mse;
  auto pass = [&](bool overwrite) {
    PassContext context;
    context.overwrite_gradients = overwrite;
    const auto out = model.forward(context, ConstMatrixView<double>(x.data(), 3, batch));
    mse.forward_backward(out, {t.data(), nullptr}, model.output_gradient());
    model.backward(context, ConstMatrixView<double>(x.data(), 3, batch));
  };
  model.zero_gradients();
  pass(false);
  const std::vector<double> expected(model.gradients(), model.gradients() + count);
  ASSERT_GT(std::count_if(expected.begin(), expected.end(), [](double g) { return g != 0.0; }), 60);
  std::fill_n(model.gradients(), count, 1e3);  // stale values everywhere
  model.prepare_gradient_overwrite();
  pass(true);
  // Equal to rounding: Eigen evaluates a product this small coefficient by coefficient, in
  // another order when it writes than when it adds.
  for (size_t i = 0; i < count; ++i) EXPECT_NEAR(model.gradients()[i], expected[i], 1e-12) << i;
  // Without the overwrite the same pass adds onto them: every gradient doubles.
  pass(false);
  for (size_t i = 0; i < count - 2; ++i) EXPECT_NEAR(model.gradients()[i], 2.0 * expected[i], 1e-12) << i;
}

TEST(Model, OnlyTheLayersThatAddAreCleared) {
  const std::vector<LayerSpec> specs = mpiddp::testing::specs(R"([
      {"type": "linear", "out": 4}, {"type": "batchnorm1d"},
      {"type": "residual", "layers": [{"type": "linear", "out": 4}]},
      {"type": "residual", "layers": [{"type": "batchnorm1d"}, {"type": "linear", "out": 4}]}])");
  Model<float> model(kInput, specs, 2, 1);
  std::fill_n(model.gradients(), model.gradient_count(), 5.0f);
  model.prepare_gradient_overwrite();
  // 0: linear 3 -> 4 (16), 1: batchnorm (8), 2: residual of a linear (20), 3: residual with a
  // batchnorm (8 + 20), then the reserved slot.
  ASSERT_EQ(model.gradient_count(), 73);
  for (Index i = 0; i < model.gradient_count(); ++i) {
    const bool added_to = (i >= 16 && i < 24) || i >= 44;
    EXPECT_EQ(model.gradients()[i], added_to ? 0.0f : 5.0f) << i;
  }
}

}  // namespace
}  // namespace mpiddp::nn
