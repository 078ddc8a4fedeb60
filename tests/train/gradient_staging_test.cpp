// ZeRO-2's staging of the gradients by unit (train/gradient_staging.hpp): the slots taken in
// turn in backward order, each the size of its largest unit, and the tied units pinned.
#include "mpiddp/train/gradient_staging.hpp"

#include <gtest/gtest.h>

namespace mpiddp::train {
namespace {

TEST(GradientStaging, UnitsTakeTheSlotsInTurnFromTheLastAndTiedOnesArePinned) {
  // Layers: 0 a table of 100 that the head ties to, 1 without parameters, 2 of 30, 3 of 50,
  // 4 of 40, 5 the head without parameters of its own.
  nn::LayerUnits layers{{0, 100, 100, 130, 180, 220, 220}, {1, 0, 0, 0, 0, 0}};
  const GradientStaging staging = plan_gradient_staging(layers);
  ASSERT_EQ(staging.units.size(), 4u);  // the layers with parameters
  // Backward meets 4, 3, 2, 0: slots 0, 1, 0, and the table pinned.
  EXPECT_EQ(staging.units[3].layer, 4u);
  EXPECT_EQ(staging.units[3].slot, 0);
  EXPECT_EQ(staging.units[2].slot, 1);
  EXPECT_EQ(staging.units[1].slot, 0);
  EXPECT_EQ(staging.units[0].slot, GradientStaging::kPinned);
  EXPECT_EQ(staging.units[1].first, 100);
  EXPECT_EQ(staging.units[1].end, 130);
  // Slot 0 takes 40 and 30, slot 1 takes 50; the table after them.
  EXPECT_EQ(staging.slot_values[0], 40);
  EXPECT_EQ(staging.slot_values[1], 50);
  EXPECT_EQ(staging.pinned_values, 100);
  EXPECT_EQ(staging.values(), 190);  // in place of 220
  EXPECT_EQ(staging.begin_of(staging.units[3]), 0);
  EXPECT_EQ(staging.begin_of(staging.units[2]), 40);
  EXPECT_EQ(staging.begin_of(staging.units[1]), 0);
  EXPECT_EQ(staging.begin_of(staging.units[0]), 90);
}

TEST(GradientStaging, TwoPinnedUnitsLieOneAfterTheOther) {
  nn::LayerUnits layers{{0, 10, 30, 35}, {1, 1, 0}};
  const GradientStaging staging = plan_gradient_staging(layers);
  ASSERT_EQ(staging.units.size(), 3u);
  EXPECT_EQ(staging.units[2].slot, 0);
  EXPECT_EQ(staging.slot_values[0], 5);
  EXPECT_EQ(staging.slot_values[1], 0);
  // Pinned in backward order: layer 1 first (offset 0), then layer 0 (offset 20).
  EXPECT_EQ(staging.begin_of(staging.units[1]), 5);
  EXPECT_EQ(staging.begin_of(staging.units[0]), 25);
  EXPECT_EQ(staging.values(), 35);
}

}  // namespace
}  // namespace mpiddp::train
