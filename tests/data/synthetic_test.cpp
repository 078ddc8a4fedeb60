#include "mpiddp/data/synthetic.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace mpiddp::data {
namespace {

TEST(Synthetic, RegressionIsDeterministicAndNormal) {
  SyntheticConfig c;
  c.source = "synthetic_regression";
  c.samples = 4000;
  c.features = 3;
  const auto a = make_synthetic<double>(c, 5, 6), b = make_synthetic<double>(c, 5, 6);
  EXPECT_TRUE(std::equal(a.x, a.x + 12000, b.x));
  EXPECT_TRUE(std::equal(a.y, a.y + 4000, b.y));
  double mean = 0, var = 0;
  for (int i = 0; i < 12000; ++i) mean += a.x[i];
  mean /= 12000;
  for (int i = 0; i < 12000; ++i) var += (a.x[i] - mean) * (a.x[i] - mean);
  var /= 12000;
  EXPECT_NEAR(mean, 0.0, 0.04);  // 4 standard errors of 1/sqrt(12000)
  EXPECT_NEAR(var, 1.0, 0.06);
}

TEST(Synthetic, RegressionTargetsFollowTheLinearModel) {
  // With noise 0 the targets are exactly linear in X: fit w from 3 samples, check a 4th.
  SyntheticConfig c;
  c.source = "synthetic_regression";
  c.samples = 50;
  c.features = 2;
  c.noise = 0.0;
  const auto d = make_synthetic<double>(c, 3, 4);
  // Solve [x0; x1] w = [y0; y1].
  const double a = d.x[0], b = d.x[1], e = d.x[2], f = d.x[3];
  const double det = a * f - b * e;
  const double w0 = (d.y[0] * f - b * d.y[1]) / det, w1 = (a * d.y[1] - e * d.y[0]) / det;
  for (int i = 2; i < 50; ++i) EXPECT_NEAR(d.y[i], w0 * d.x[2 * i] + w1 * d.x[2 * i + 1], 1e-9);
}

TEST(Synthetic, ClassificationUsesEveryClass) {
  for (const char* generator : {"teacher", "blobs"}) {
    SyntheticConfig c;
    c.source = "synthetic_classification";
    c.samples = 2000;
    c.features = 8;
    c.classes = 4;
    c.generator = generator;
    const auto d = make_synthetic<float>(c, 1, 2);
    EXPECT_EQ(d.classes, 4);
    std::set<int32_t> seen(d.labels, d.labels + 2000);
    EXPECT_EQ(seen, (std::set<int32_t>{0, 1, 2, 3})) << generator;
  }
}

}  // namespace
}  // namespace mpiddp::data

namespace mpiddp::data {
namespace {

TEST(Synthetic, SplitsShareTheTaskNotTheSamples) {
  SyntheticConfig c;
  c.source = "synthetic_regression";
  c.samples = 20;
  c.features = 2;
  c.noise = 0.0;
  const auto train = make_synthetic<double>(c, 9, 1), eval = make_synthetic<double>(c, 9, 2);
  EXPECT_NE(train.x[0], eval.x[0]);
  // Same w: fit it on the train split, predict the eval split exactly.
  const double a = train.x[0], b = train.x[1], e = train.x[2], f = train.x[3];
  const double det = a * f - b * e;
  const double w0 = (train.y[0] * f - b * train.y[1]) / det, w1 = (a * train.y[1] - e * train.y[0]) / det;
  for (int i = 0; i < 20; ++i) EXPECT_NEAR(eval.y[i], w0 * eval.x[2 * i] + w1 * eval.x[2 * i + 1], 1e-9);
}

}  // namespace
}  // namespace mpiddp::data
