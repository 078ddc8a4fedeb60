#include "mpiddp/optim/schedule.hpp"

#include <gtest/gtest.h>

namespace mpiddp::optim {
namespace {

TEST(Schedule, ConstantIsTheBaseRate) {
  ScheduleConfig c;
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 0.3, 17, 3, 100, 10), 0.3);
}

TEST(Schedule, StepDecaysEveryStepSizeEpochs) {
  ScheduleConfig c;
  c.type = "step";
  c.step_size = 2;
  c.gamma = 0.5;
  // epochs 1, 2 -> 1; 3, 4 -> 0.5; 5 -> 0.25 (StepLR stepped once per epoch)
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 1, 1, 0, 5), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 9, 2, 0, 5), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 9, 3, 0, 5), 0.5);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 9, 5, 0, 5), 0.25);
}

TEST(Schedule, CosinePerStep) {
  ScheduleConfig c;
  c.type = "cosine";
  c.unit = "step";
  c.t_max = 4;
  // u = step - 1: u=0 -> 1, u=2 -> (1 + cos(pi/2))/2 = 0.5, u=4 -> 0
  EXPECT_NEAR(scheduled_lr(c, 1.0, 1, 1, 8, 2), 1.0, 1e-15);
  EXPECT_NEAR(scheduled_lr(c, 1.0, 3, 1, 8, 2), 0.5, 1e-15);
  EXPECT_NEAR(scheduled_lr(c, 1.0, 5, 2, 8, 2), 0.0, 1e-15);
}

TEST(Schedule, CosineDefaultsToTheWholeRunWithFloor) {
  ScheduleConfig c;
  c.type = "cosine";
  c.eta_min = 0.1;
  // t_max 0 -> total epochs 3; epoch 2: u = 1, 0.1 + 0.9 (1 + cos(pi/3))/2 = 0.1 + 0.9*0.75
  EXPECT_NEAR(scheduled_lr(c, 1.0, 5, 2, 9, 3), 0.775, 1e-15);
}

TEST(Schedule, LinearWarmup) {
  ScheduleConfig c;
  c.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 1, 1, 10, 1), 0.25);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 3, 1, 10, 1), 0.75);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 4, 1, 10, 1), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 9, 1, 10, 1), 1.0);
}

}  // namespace
}  // namespace mpiddp::optim
