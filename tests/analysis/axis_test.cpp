#include "mpiddp/analysis/axis.hpp"

#include <gtest/gtest.h>

namespace mpiddp::analysis {
namespace {

TEST(Axis, LinearTicksAreNiceSteps) {
  // 0..80 over ~6 ticks: raw step 13.3 -> 20; ticks 0, 20, 40, 60, 80.
  const Axis a = linear_axis(0.0, 80.0);
  EXPECT_EQ(a.ticks, (std::vector<double>{0, 20, 40, 60, 80}));
  // 0.083..2.38: raw step 0.383 -> 0.5; range widened to 0..2.5.
  const Axis b = linear_axis(0.083, 2.38);
  EXPECT_DOUBLE_EQ(b.lo, 0.0);
  EXPECT_DOUBLE_EQ(b.hi, 2.5);
  ASSERT_EQ(b.ticks.size(), 6u);
  EXPECT_DOUBLE_EQ(b.ticks[3], 1.5);
  // A single value gets a range around it.
  const Axis c = linear_axis(5.0, 5.0);
  EXPECT_LT(c.lo, 5.0);
  EXPECT_GT(c.hi, 5.0);
}

TEST(Axis, LogTicksAreDecades) {
  const Axis a = log_axis(3e-9, 4.7e-7);
  EXPECT_TRUE(a.log);
  EXPECT_DOUBLE_EQ(a.lo, 1e-9);
  EXPECT_DOUBLE_EQ(a.hi, 1e-6);
  ASSERT_EQ(a.ticks.size(), 4u);
  EXPECT_DOUBLE_EQ(a.ticks[1], 1e-8);
  // 20 decades, at most 8 ticks: every third decade.
  const Axis b = log_axis(1e-20, 1.0, 8);
  EXPECT_EQ(b.ticks.size(), 7u);
  EXPECT_DOUBLE_EQ(b.ticks[1], 1e-17);
}

TEST(Axis, PixelMapping) {
  const Axis lin = linear_axis(0.0, 80.0);
  EXPECT_DOUBLE_EQ(lin.to_pixel(20.0, 100.0, 500.0), 200.0);
  EXPECT_DOUBLE_EQ(lin.to_pixel(40.0, 300.0, 100.0), 200.0);  // y grows upwards
  const Axis log = log_axis(1e-9, 1e-6);
  EXPECT_DOUBLE_EQ(log.to_pixel(1e-8, 0.0, 300.0), 100.0);  // one decade of three
  EXPECT_DOUBLE_EQ(log.to_pixel(0.0, 0.0, 300.0), 0.0);     // no place for 0: the floor
}

TEST(Axis, TickLabels) {
  EXPECT_EQ(tick_label(0.25), "0.25");
  EXPECT_EQ(tick_label(80), "80");
  EXPECT_EQ(tick_label(0), "0");
  EXPECT_EQ(tick_label(1e-6), "1e-06");
  EXPECT_EQ(tick_label(2e5), "2e+05");
}

}  // namespace
}  // namespace mpiddp::analysis
