#include "mpiddp/optim/update_rule.hpp"

#include <gtest/gtest.h>

#include "mpiddp/core/error.hpp"

namespace mpiddp::optim {
namespace {

// Runs `steps` updates of one parameter starting at 1 with a constant gradient 0.5.
std::vector<double> trajectory(const OptimizerConfig& config, int steps) {
  auto optimizer = make_update_rule<double>(config, 1);
  double p = 1.0;
  const double g = 0.5;
  std::vector<double> values;
  for (int i = 0; i < steps; ++i) {
    optimizer->step(&p, &g, config.lr);
    values.push_back(p);
  }
  return values;
}

OptimizerConfig sgd(double momentum = 0, double dampening = 0, bool nesterov = false,
                    double weight_decay = 0) {
  OptimizerConfig c;
  c.type = "sgd";
  c.lr = 0.1;
  c.momentum = momentum;
  c.dampening = dampening;
  c.nesterov = nesterov;
  c.weight_decay = weight_decay;
  return c;
}

TEST(Sgd, Plain) {
  // p = 1 - 0.1 * 0.5 = 0.95, then 0.9
  const auto p = trajectory(sgd(), 2);
  EXPECT_DOUBLE_EQ(p[0], 0.95);
  EXPECT_DOUBLE_EQ(p[1], 0.9);
}

TEST(Sgd, Momentum) {
  // step 1: buf = 0.5, p = 0.95; step 2: buf = 0.9*0.5 + 0.5 = 0.95, p = 0.95 - 0.095 = 0.855
  const auto p = trajectory(sgd(0.9), 2);
  EXPECT_DOUBLE_EQ(p[0], 0.95);
  EXPECT_NEAR(p[1], 0.855, 1e-15);
}

TEST(Sgd, MomentumWithDampening) {
  // step 1: buf = g = 0.5 (no dampening on the first step), p = 0.95
  // step 2: buf = 0.9*0.5 + (1-0.5)*0.5 = 0.7, p = 0.95 - 0.07 = 0.88
  const auto p = trajectory(sgd(0.9, 0.5), 2);
  EXPECT_DOUBLE_EQ(p[0], 0.95);
  EXPECT_NEAR(p[1], 0.88, 1e-15);
}

TEST(Sgd, Nesterov) {
  // step 1: buf = 0.5, g = 0.5 + 0.9*0.5 = 0.95, p = 0.905
  // step 2: buf = 0.95, g = 0.5 + 0.855 = 1.355, p = 0.905 - 0.1355 = 0.7695
  const auto p = trajectory(sgd(0.9, 0, true), 2);
  EXPECT_NEAR(p[0], 0.905, 1e-15);
  EXPECT_NEAR(p[1], 0.7695, 1e-15);
}

TEST(Sgd, WeightDecay) {
  // g = 0.5 + 0.1 * 1 = 0.6, p = 0.94; then g = 0.5 + 0.094, p = 0.94 - 0.0594 = 0.8806
  const auto p = trajectory(sgd(0, 0, false, 0.1), 2);
  EXPECT_NEAR(p[0], 0.94, 1e-15);
  EXPECT_NEAR(p[1], 0.8806, 1e-15);
}

TEST(Sgd, NesterovWithoutMomentumIsAConfigError) {
  EXPECT_THROW(make_update_rule<float>(sgd(0, 0, true), 1), ConfigError);
}

OptimizerConfig adam(const char* type, double weight_decay) {
  OptimizerConfig c;
  c.type = type;
  c.lr = 0.1;
  c.weight_decay = weight_decay;
  return c;
}

TEST(Adam, HandValues) {
  // step 1: m = 0.05, v = 0.00025, bc1 = 0.1, bc2 = 0.001: step size 1,
  //   denom = sqrt(0.00025)/sqrt(0.001) + 1e-8 = 0.5 + 1e-8, p = 1 - 0.05/(0.5 + 1e-8)
  // step 2: m = 0.095, v = 0.00049975, bc1 = 0.19, bc2 = 0.001999: v/bc2 = 0.25,
  //   p -= (0.1/0.19) * 0.095 / (0.5 + 1e-8) = 0.05 / (0.5 + 1e-8)
  const auto p = trajectory(adam("adam", 0), 2);
  const double update = 0.05 / (0.5 + 1e-8);
  EXPECT_NEAR(p[0], 1 - update, 1e-14);
  EXPECT_NEAR(p[1], 1 - 2 * update, 1e-14);
}

TEST(Adam, L2WeightDecay) {
  // g = 0.5 + 0.1 * 1 = 0.6: m = 0.06, v = 0.00036, denom = 0.6 + 1e-8, p = 1 - 0.06/(0.6 + 1e-8)
  const auto p = trajectory(adam("adam", 0.1), 1);
  EXPECT_NEAR(p[0], 1 - 0.06 / (0.6 + 1e-8), 1e-14);
}

TEST(AdamW, DecoupledWeightDecay) {
  // p = 1 * (1 - 0.1*0.01) = 0.999, then the Adam step of HandValues: - 0.05/(0.5 + 1e-8)
  const auto p = trajectory(adam("adamw", 0.01), 1);
  EXPECT_NEAR(p[0], 0.999 - 0.05 / (0.5 + 1e-8), 1e-14);
}

TEST(UpdateRule, TheAverageOfTheWeightsByHand) {
  // SGD lr 0.1 on p = (1, 2) with gradients (1, -1) every step; ema.decay 0.5, every 2nd step.
  OptimizerConfig config = sgd();
  config.ema_decay = 0.5;
  config.ema_every_steps = 2;
  auto o = make_update_rule<double>(config, 2);
  ASSERT_NE(o->average(), nullptr);
  ASSERT_EQ(o->state_buffers().size(), 1u);  // SGD without momentum has none of its own
  EXPECT_EQ(o->state_buffers()[0].name, "ema");
  std::vector<double> p = {1.0, 2.0};
  const std::vector<double> g = {1.0, -1.0};
  o->step(p.data(), g.data(), 0.1);  // p = (0.9, 2.1); step 1 of every 2: the average is the start
  EXPECT_EQ(*o->average(), (std::vector<double>{1.0, 2.0}));
  o->step(p.data(), g.data(), 0.1);  // p = (0.8, 2.2): ema = 0.5 * (1, 2) + 0.5 * (0.8, 2.2)
  EXPECT_NEAR((*o->average())[0], 0.9, 1e-15);
  EXPECT_NEAR((*o->average())[1], 2.1, 1e-15);
  o->step(p.data(), g.data(), 0.1);
  o->step(p.data(), g.data(), 0.1);  // p = (0.6, 2.4): ema = 0.5 * (0.9, 2.1) + 0.5 * (0.6, 2.4)
  EXPECT_NEAR((*o->average())[0], 0.75, 1e-15);
  EXPECT_NEAR((*o->average())[1], 2.25, 1e-15);
  // Off: no average, no state buffer.
  EXPECT_EQ(make_update_rule<double>(sgd(), 2)->average(), nullptr);
  EXPECT_TRUE(make_update_rule<double>(sgd(), 2)->state_buffers().empty());
}

TEST(UpdateRule, StateBuffersAreNamed) {
  auto momentum = make_update_rule<float>(sgd(0.9), 3);
  ASSERT_EQ(momentum->state_buffers().size(), 1u);
  EXPECT_EQ(momentum->state_buffers()[0].name, "momentum_buffer");
  EXPECT_EQ(momentum->state_buffers()[0].values->size(), 3u);
  auto a = make_update_rule<float>(adam("adam", 0), 3);
  ASSERT_EQ(a->state_buffers().size(), 2u);
  EXPECT_EQ(a->state_buffers()[1].name, "exp_avg_sq");
}

}  // namespace
}  // namespace mpiddp::optim
