// What counts as an improvement for checkpoint.keep_best and early stopping, by hand.
#include "mpiddp/train/improvement.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace mpiddp::train {
namespace {

TEST(ImprovementTracker, LossesImproveDownwardByMoreThanMinDelta) {
  ImprovementTracker loss("eval_loss", 0.1);
  EXPECT_TRUE(loss.observe(1.0, 10));  // the first value is the best so far
  EXPECT_FALSE(loss.observe(0.95, 20));  // better, but not by more than 0.1
  EXPECT_FALSE(loss.observe(0.9, 30));   // 1.0 - 0.9 is 0.1 in decimal, just under in binary: not more
  EXPECT_EQ(loss.evaluations_since_best(), 2);
  EXPECT_TRUE(loss.observe(0.85, 40));
  EXPECT_EQ(*loss.best(), 0.85);
  EXPECT_EQ(loss.best_step(), 40);
  EXPECT_EQ(loss.evaluations_since_best(), 0);
  EXPECT_FALSE(loss.observe(2.0, 50));  // worse
  EXPECT_FALSE(loss.observe(std::numeric_limits<double>::quiet_NaN(), 60));  // never an improvement
  EXPECT_EQ(loss.evaluations_since_best(), 2);
  EXPECT_EQ(*loss.best(), 0.85);
}

TEST(ImprovementTracker, AccuracyImprovesUpwardAndEqualIsNoImprovement) {
  ImprovementTracker accuracy("eval_accuracy", 0.0);
  EXPECT_FALSE(accuracy.observe(std::nan(""), 1));  // a NaN is not a first best either
  EXPECT_FALSE(accuracy.best().has_value());
  EXPECT_TRUE(accuracy.observe(0.5, 2));
  EXPECT_FALSE(accuracy.observe(0.5, 3));  // equal: the first of equals stays the best
  EXPECT_FALSE(accuracy.observe(0.4, 4));
  EXPECT_TRUE(accuracy.observe(0.6, 5));
  EXPECT_EQ(accuracy.best_step(), 5);
}

TEST(ImprovementTracker, StateRoundTripsAndAnotherMetricsStateIsIgnored) {
  ImprovementTracker original("eval_loss", 0.0);
  original.observe(0.7, 4);
  original.observe(0.9, 8);
  ImprovementTracker restored("eval_loss", 0.0);
  restored.restore(original.state());
  EXPECT_EQ(restored.best(), original.best());
  EXPECT_EQ(restored.best_step(), 4);
  EXPECT_EQ(restored.evaluations_since_best(), 1);
  // After the restore both go on alike.
  EXPECT_EQ(restored.observe(0.69, 12), original.observe(0.69, 12));
  ImprovementTracker other("eval_accuracy", 0.0);
  other.restore(original.state());
  EXPECT_FALSE(other.best().has_value());
  // A state whose fields have other types (a damaged file's metadata) is no state, not a crash.
  ImprovementTracker damaged("eval_loss", 0.0);
  damaged.restore({{"metric", "eval_loss"}, {"best", "x"}, {"best_step", "y"}, {"since_best", -4}});
  EXPECT_FALSE(damaged.best().has_value());
  EXPECT_EQ(damaged.evaluations_since_best(), 0);
}

}  // namespace
}  // namespace mpiddp::train
