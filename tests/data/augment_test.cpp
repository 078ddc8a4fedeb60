// data.train.augment's transforms on hand-made images, its draws, their independence of the
// batch, and its config errors (src/data/augment.cpp, src/config/data_source.cpp).
#include "mpiddp/data/augment.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "mpiddp/config/config.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/train/trainer.hpp"
#include "../support/config_errors.hpp"

namespace mpiddp::data {
namespace {

// The 1 x 3 x 4 image of the tests: value (0, y, x) = 4 y + x + 1.
//    1  2  3  4
//    5  6  7  8
//    9 10 11 12
constexpr ImageShape kAugmentImage{1, 3, 4};
std::vector<double> augment_image(Index channels = 1) {
  std::vector<double> image(static_cast<size_t>(channels * 12));
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<double>(i + 1);
  return image;
}

std::vector<double> augment_cropped(const std::vector<double>& image, const ImageShape& shape, Index padding,
                                    CropOffsets offsets) {
  std::vector<double> out(image.size(), -1.0);
  crop_padded(image.data(), out.data(), shape, padding, offsets);
  return out;
}

TEST(Augment, CropOfThePaddedImageAtKnownOffsets) {
  const std::vector<double> image = augment_image();
  // Padding 1 makes it 5 x 6; offsets (dy, dx) = (0, 2) read image (y - 1, x + 1): the top row
  // is the padding, then rows 0 and 1 moved left by one with a zero entering at the right.
  EXPECT_EQ(augment_cropped(image, kAugmentImage, 1, {0, 2}),
            (std::vector<double>{0, 0, 0, 0, 2, 3, 4, 0, 6, 7, 8, 0}));
  // (2, 0) reads (y + 1, x - 1): rows 1 and 2 moved right, a zero row at the bottom.
  EXPECT_EQ(augment_cropped(image, kAugmentImage, 1, {2, 0}),
            (std::vector<double>{0, 5, 6, 7, 0, 9, 10, 11, 0, 0, 0, 0}));
  // (1, 1) = (padding, padding) is the image itself; (4, 4) at padding 2 reads (y + 2, x + 2).
  EXPECT_EQ(augment_cropped(image, kAugmentImage, 1, {1, 1}), image);
  EXPECT_EQ(augment_cropped(image, kAugmentImage, 2, {4, 4}),
            (std::vector<double>{11, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  // Padding 0 takes the only crop there is; padding 5 at (0, 0) sees nothing of a 3 x 4 image.
  EXPECT_EQ(augment_cropped(image, kAugmentImage, 0, {0, 0}), image);
  EXPECT_EQ(augment_cropped(image, kAugmentImage, 5, {0, 0}), std::vector<double>(12, 0.0));
  // Each channel moves alike: the second channel (13..24) at (0, 2).
  EXPECT_EQ(augment_cropped(augment_image(2), {2, 3, 4}, 1, {0, 2}),
            (std::vector<double>{0, 0, 0, 0, 2, 3, 4, 0, 6, 7, 8, 0, 0, 0, 0, 0, 14, 15, 16, 0, 18, 19, 20, 0}));
}

TEST(Augment, CropOffsetsAreUniformOverTwicePaddingPlusOne) {
  // Padding 2: 5 offsets per axis. Over 20 000 samples each is drawn 4 000 times, give or take
  // 4 standard deviations of sqrt(20 000 (1/5)(4/5)) = 57.
  constexpr Index kSamples = 20000, kPadding = 2;
  std::vector<int> dy(5, 0), dx(5, 0);
  int same = 0;
  for (Index i = 0; i < kSamples; ++i) {
    const CropOffsets o = draw_crop_offsets(AugmentDraws(7, 3, i, 0), kPadding);
    ASSERT_GE(o.dy, 0);
    ASSERT_LE(o.dy, 2 * kPadding);
    ASSERT_GE(o.dx, 0);
    ASSERT_LE(o.dx, 2 * kPadding);
    ++dy[static_cast<size_t>(o.dy)];
    ++dx[static_cast<size_t>(o.dx)];
    same += o.dy == o.dx;
  }
  for (int k = 0; k < 5; ++k) {
    EXPECT_NEAR(dy[static_cast<size_t>(k)], 4000, 230) << "dy = " << k;
    EXPECT_NEAR(dx[static_cast<size_t>(k)], 4000, 230) << "dx = " << k;
  }
  EXPECT_NEAR(same, 4000, 230);  // dy and dx independent: equal one time in 5
  // The batch's crop is the one drawn for the sample, cut by crop_padded.
  std::vector<double> x = augment_image();
  const Index sample = 41;
  Augmentation<double> crop({{.type = AugmentType::kRandomCrop, .padding = 1}}, kAugmentImage);
  crop.apply(x.data(), 1, &sample, 7, 3);
  EXPECT_EQ(x, augment_cropped(augment_image(), kAugmentImage, 1, draw_crop_offsets(AugmentDraws(7, 3, sample, 0), 1)));
}

TEST(Augment, FlipReversesEveryRow) {
  std::vector<double> image = augment_image();
  flip_width(image.data(), kAugmentImage);
  EXPECT_EQ(image, (std::vector<double>{4, 3, 2, 1, 8, 7, 6, 5, 12, 11, 10, 9}));
  // p = 1 always flips, p = 0 never, p = 0.3 about 3 000 times in 10 000 (sd 46).
  int flips = 0;
  for (Index i = 0; i < 10000; ++i) {
    const AugmentDraws draws(1, 0, i, 2);
    EXPECT_TRUE(draw_flip(draws, 1.0));
    EXPECT_FALSE(draw_flip(draws, 0.0));
    flips += draw_flip(draws, 0.3);
  }
  EXPECT_NEAR(flips, 3000, 184);
  std::vector<double> x = augment_image();
  const Index sample = 5;
  Augmentation<double> flip({{.type = AugmentType::kHorizontalFlip, .p = 1.0}}, kAugmentImage);
  flip.apply(x.data(), 1, &sample, 1, 0);
  EXPECT_EQ(x, image);
}

TEST(Augment, NoiseIsNormalWithTheGivenStd) {
  // 40 zero images of 1 x 50 x 49 (an odd count of values: the last pair's second normal
  // unused): 98 000 values of N(0, 0.5^2). Mean within 4 standard errors (4 x 0.5 / sqrt(98 000)
  // = 0.0064), std within 4 of its standard errors (0.5 / sqrt(2 x 98 000) = 0.0011, so 0.0045),
  // and the share within one std of 0 that of a normal, 0.6827, within 4 x 0.0015.
  constexpr ImageShape shape{1, 50, 49};
  constexpr Index kImages = 40;
  std::vector<double> x(static_cast<size_t>(shape.size() * kImages), 0.0);
  std::vector<Index> samples(kImages);
  for (Index j = 0; j < kImages; ++j) samples[static_cast<size_t>(j)] = 100 + j;
  Augmentation<double> noise({{.type = AugmentType::kGaussianNoise, .std = 0.5}}, shape);
  noise.apply(x.data(), kImages, samples.data(), 3, 1);
  double sum = 0.0, squares = 0.0;
  int within = 0;
  for (double v : x) {
    sum += v;
    squares += v * v;
    within += std::fabs(v) < 0.5;
  }
  const double n = static_cast<double>(x.size());
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.0064);
  EXPECT_NEAR(std::sqrt(squares / n - mean * mean), 0.5, 0.0045);
  EXPECT_NEAR(within / n, 0.6827, 0.006);
  // Value j takes normal j % 2 of block j / 2.
  const std::array<double, 2> z = draw_normal_pair(AugmentDraws(3, 1, 100, 0), 1);
  EXPECT_EQ(x[2], 0.5 * z[0]);
  EXPECT_EQ(x[3], 0.5 * z[1]);
  EXPECT_NE(x[2], x[3]);
}

// Four different images, one per column: sample s's image is augment_image() + 100 s.
std::vector<double> augment_batch(const std::vector<Index>& samples) {
  std::vector<double> x;
  for (Index s : samples)
    for (double v : augment_image()) x.push_back(v + 100.0 * static_cast<double>(s));
  return x;
}

std::vector<AugmentSpec> augment_all_three() {
  return {{.type = AugmentType::kRandomCrop, .padding = 1},
          {.type = AugmentType::kHorizontalFlip, .p = 0.5},
          {.type = AugmentType::kGaussianNoise, .std = 0.25}};
}

// Column `column` of an augmented batch.
std::vector<double> augment_column(const std::vector<double>& x, Index column) {
  return {x.begin() + column * 12, x.begin() + (column + 1) * 12};
}

TEST(Augment, ASampleIsAugmentedAlikeInAnyBatchAndColumn) {
  Augmentation<double> augment(augment_all_three(), kAugmentImage);
  const std::vector<Index> order = {7, 3, 11, 9}, reversed = {9, 11, 3, 7};
  std::vector<double> a = augment_batch(order), b = augment_batch(reversed);
  augment.apply(a.data(), 4, order.data(), 42, 2);
  augment.apply(b.data(), 4, reversed.data(), 42, 2);
  for (Index j = 0; j < 4; ++j) {
    const Index sample = order[static_cast<size_t>(j)];
    std::vector<double> alone = augment_batch({sample});
    augment.apply(alone.data(), 1, &sample, 42, 2);
    EXPECT_EQ(augment_column(a, j), alone) << "sample " << sample;
    EXPECT_EQ(augment_column(b, 3 - j), alone) << "sample " << sample;
    EXPECT_NE(alone, augment_batch({sample})) << "sample " << sample << " left as it was";
  }
  // The same in float: its own bits, in any column.
  Augmentation<float> augment_float(augment_all_three(), kAugmentImage);
  std::vector<float> fa(48), fb(48);
  for (size_t i = 0; i < 48; ++i) fa[i] = static_cast<float>(augment_batch(order)[i]);
  for (size_t i = 0; i < 48; ++i) fb[i] = static_cast<float>(augment_batch(reversed)[i]);
  augment_float.apply(fa.data(), 4, order.data(), 42, 2);
  augment_float.apply(fb.data(), 4, reversed.data(), 42, 2);
  EXPECT_EQ(std::memcmp(fa.data(), fb.data() + 36, 12 * sizeof(float)), 0);
}

TEST(Augment, AnotherEpochOrSampleIndexDrawsAnother) {
  Augmentation<double> augment(augment_all_three(), kAugmentImage);
  auto augmented = [&](Index sample, int64_t epoch, uint64_t seed) {
    std::vector<double> x = augment_image();  // the same image under every index
    augment.apply(x.data(), 1, &sample, seed, epoch);
    return x;
  };
  const std::vector<double> base = augmented(5, 1, 42);
  EXPECT_EQ(augmented(5, 1, 42), base);
  EXPECT_NE(augmented(5, 2, 42), base);
  EXPECT_NE(augmented(6, 1, 42), base);
  EXPECT_NE(augmented(5, 1, 43), base);
  // The transforms draw apart: a noise at place 0 and one at place 1 differ.
  EXPECT_NE(draw_normal_pair(AugmentDraws(42, 1, 5, 0), 0), draw_normal_pair(AugmentDraws(42, 1, 5, 1), 0));
}

TEST(Augment, NothingToDoIsTheIdentityBitForBit) {
  std::vector<double> x = augment_batch({0, 1, 2, 3});
  x[5] = -0.0;  // a -0.0 stays one (adding a zero noise would make it +0.0)
  const std::vector<double> before = x;
  const std::vector<Index> samples = {0, 1, 2, 3};
  Augmentation<double> none({{.type = AugmentType::kRandomCrop, .padding = 0},
                             {.type = AugmentType::kHorizontalFlip, .p = 0.0},
                             {.type = AugmentType::kGaussianNoise, .std = 0.0}},
                            kAugmentImage);
  for (int64_t epoch = 0; epoch < 5; ++epoch) none.apply(x.data(), 4, samples.data(), 9, epoch);
  EXPECT_EQ(std::memcmp(x.data(), before.data(), x.size() * sizeof(double)), 0);
  EXPECT_TRUE(std::signbit(x[5]));
}

TEST(Augment, OnlyImagesAreAugmented) {
  EXPECT_EQ(augment_image_shape({2, 5, 7}, 10, "x.npy").size(), 70);
  for (const std::vector<Index>& shape : {std::vector<Index>{6}, std::vector<Index>{28, 28},
                                          std::vector<Index>{1, 1, 2, 2}, std::vector<Index>{1, 0, 4}}) {
    try {
      augment_image_shape(shape, 10, "synthetic_regression");
      ADD_FAILURE() << "accepted " << shape.size() << " dimensions";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.code(), kExitConfig);
      EXPECT_EQ(e.key_path(), "data.train.augment");
      EXPECT_NE(std::string(e.what()).find("synthetic_regression"), std::string::npos) << e.what();
    }
  }
  try {
    augment_image_shape({6}, 10, "d.csv");
    ADD_FAILURE() << "accepted (6)";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("as samples of shape (6)"), std::string::npos) << e.what();
  }
  // The trainer refuses it when it meets the data: the default experiment's 6 synthetic features.
  io::Json user = config::default_experiment();
  user["data"]["train"]["augment"] = io::Json::parse(R"([{"type": "horizontal_flip"}])");
  const config::Config c = config::parse_config(user);
  distributed::LocalCommunicator one;
  EXPECT_EQ(test::config_error_key([&] { train::run_training(c, one, {.quiet = true}); }), "data.train.augment");
}

// The key path and message of the error that data.train (or data.eval) with this augment gives.
struct AugmentError {
  std::string key, message;
};
AugmentError augment_error(const std::string& augment, const std::string& split = "train") {
  io::Json user = config::default_experiment();
  if (split == "eval") user["data"]["eval"] = user["data"]["train"];
  user["data"][split]["augment"] = io::Json::parse(augment);
  try {
    config::parse_config(user);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), kExitConfig);
    return {e.key_path(), e.what()};
  }
  return {"(no error)", ""};
}

bool augment_says(const AugmentError& error, const std::string& text) {
  return error.message.find(text) != std::string::npos;
}

TEST(AugmentConfig, ParsesTheListInOrderWithDefaults) {
  io::Json user = config::default_experiment();
  user["data"]["train"]["augment"] = io::Json::parse(
      R"([{"type": "random_crop", "padding": 4}, {"type": "horizontal_flip"}, {"type": "gaussian_noise", "std": 0.1}])");
  const config::Config c = config::parse_config(user);
  ASSERT_EQ(c.train_data.augment.size(), 3u);
  EXPECT_EQ(c.train_data.augment[0].type, AugmentType::kRandomCrop);
  EXPECT_EQ(c.train_data.augment[0].padding, 4);
  EXPECT_EQ(c.train_data.augment[1].type, AugmentType::kHorizontalFlip);
  EXPECT_EQ(c.train_data.augment[1].p, 0.5);
  EXPECT_EQ(c.train_data.augment[2].type, AugmentType::kGaussianNoise);
  EXPECT_EQ(c.train_data.augment[2].std, 0.1);
  EXPECT_EQ(c.resolved["data"]["train"]["augment"][1], io::Json::parse(R"({"type": "horizontal_flip", "p": 0.5})"));
  // Absent: none, and the resolved config holds no trace of it.
  const config::Config plain = config::parse_config(config::default_experiment());
  EXPECT_TRUE(plain.train_data.augment.empty());
  EXPECT_FALSE(plain.resolved["data"]["train"].contains("augment"));
}

TEST(AugmentConfig, ErrorsNameTheKeyPath) {
  AugmentError e = augment_error(R"([{"type": "random_crop", "padding": 1}, {"type": "horizontal_flip", "p": 1.5}])");
  EXPECT_EQ(e.key, "data.train.augment[1].p");
  EXPECT_TRUE(augment_says(e, "expected a number in [0, 1], got 1.5")) << e.message;
  e = augment_error(R"([{"type": "random_crop", "padding": -1}])");
  EXPECT_EQ(e.key, "data.train.augment[0].padding");
  EXPECT_TRUE(augment_says(e, "expected an integer in [0, 4096], got -1")) << e.message;
  EXPECT_EQ(augment_error(R"([{"type": "random_crop", "padding": 5000}])").key, "data.train.augment[0].padding");
  EXPECT_EQ(augment_error(R"([{"type": "random_crop"}])").key, "data.train.augment[0].padding");
  e = augment_error(R"([{"type": "gaussian_noise", "std": -0.1}])");
  EXPECT_EQ(e.key, "data.train.augment[0].std");
  EXPECT_TRUE(augment_says(e, "got -0.1")) << e.message;
  EXPECT_EQ(augment_error(R"([{"type": "gaussian_noise"}])").key, "data.train.augment[0].std");
  e = augment_error(R"([{"type": "rotate", "degrees": 10}])");
  EXPECT_EQ(e.key, "data.train.augment[0].type");
  EXPECT_TRUE(augment_says(e, R"(unknown value "rotate"; expected one of "random_crop", "horizontal_flip", "gaussian_noise")"))
      << e.message;
  EXPECT_EQ(augment_error(R"([{"p": 0.5}])").key, "data.train.augment[0].type");
  e = augment_error(R"([{"type": "horizontal_flip", "padding": 2}])");
  EXPECT_EQ(e.key, "data.train.augment[0].padding");
  EXPECT_TRUE(augment_says(e, "unknown key")) << e.message;
  EXPECT_EQ(augment_error(R"({"type": "horizontal_flip"})").key, "data.train.augment");
  EXPECT_EQ(augment_error(R"(["horizontal_flip"])").key, "data.train.augment[0]");
  e = augment_error(R"([{"type": "horizontal_flip"}])", "eval");
  EXPECT_EQ(e.key, "data.eval.augment");
  EXPECT_TRUE(augment_says(e, "training data only")) << e.message;
  EXPECT_EQ(augment_error("[]").key, "(no error)");
}

}  // namespace
}  // namespace mpiddp::data
