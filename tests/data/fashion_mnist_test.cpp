#include "mpiddp/data/fashion_mnist.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "fixture_files.hpp"
#include "mpiddp/core/error.hpp"

namespace mpiddp::data {
namespace {

bool package_installed() {
  return std::filesystem::exists(std::string(kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz");
}

TEST(FashionMnist, MissingFilesSayWhichPackageToInstall) {
  testing::expect_data_error(
      [] { load_fashion_mnist<float>({"test", "/nonexistent/fashion"}); },
      {"t10k-images-idx3-ubyte.gz", "/nonexistent/fashion", "dataset-fashion-mnist", "\"dir\""});
}

TEST(FashionMnist, TestSplitFromTheDebianPackage) {
  if (!package_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const auto d = load_fashion_mnist<float>({"test", kFashionMnistDir});
  EXPECT_EQ(d.name, "fashion_mnist/test");
  ASSERT_EQ(d.samples, 10000);
  ASSERT_EQ(d.features, 784);
  EXPECT_EQ(d.shape, (std::vector<Index>{1, 28, 28}));  // one-channel images, as torchvision's
  EXPECT_EQ(d.classes, 10);
  // The test split is balanced: 1000 images per class.
  std::vector<int> per_class(10, 0);
  for (Index i = 0; i < d.samples; ++i) ++per_class[d.labels[i]];
  for (int k = 0; k < 10; ++k) EXPECT_EQ(per_class[k], 1000) << "class " << k;
  // Pixels are bytes / 255: within [0, 1], both ends present, and every value a multiple
  // of 1/255.
  float lo = 1, hi = 0;
  for (Index i = 0; i < d.samples * d.features; ++i) {
    lo = std::min(lo, d.x[i]);
    hi = std::max(hi, d.x[i]);
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
  const float v = d.x[400] * 255.0f;
  EXPECT_NEAR(v, std::round(v), 1e-4);
  EXPECT_EQ(d.labels[0], 9);  // the first test image is an ankle boot (class 9)
}

TEST(FashionMnist, TrainSplitFromTheDebianPackage) {
  if (!package_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const auto d = load_fashion_mnist<float>({"train", kFashionMnistDir});
  ASSERT_EQ(d.samples, 60000);
  ASSERT_EQ(d.features, 784);
  std::vector<int> per_class(10, 0);
  for (Index i = 0; i < d.samples; ++i) ++per_class[d.labels[i]];
  for (int k = 0; k < 10; ++k) EXPECT_EQ(per_class[k], 6000) << "class " << k;
  EXPECT_EQ(d.labels[0], 9);  // the first training image is an ankle boot too
}

}  // namespace
}  // namespace mpiddp::data
