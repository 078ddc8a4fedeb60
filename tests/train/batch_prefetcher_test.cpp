// The prefetcher and the batch buffers on their own: a batch taken from the worker is, bit for
// bit, what a synchronous gather and augmentation of the same samples gives; a pass whose
// samples, seed or epoch differ from what was asked for finds nothing; a part of a held batch
// is read in place only where that keeps the buffers' 64-byte alignment, else moved to
// column 0; a request made while the worker's buffers are taken waits for take(); what the
// worker's gather throws reaches the caller of take().
#include "mpiddp/train/batch_prefetcher.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "mpiddp/core/error.hpp"

namespace mpiddp::train {
namespace {

// 40 samples of 1 x 4 x 6 images (24 values, 96 bytes a float column: a column at an odd
// offset is off the 64-byte boundary) with a class label each; value v of sample i is
// i + v / 100, so every column tells which sample it holds.
struct ImageSet {
  static constexpr Index kSamples = 40, kFeatures = 24;
  std::vector<float> x = std::vector<float>(kSamples * kFeatures);
  std::vector<int32_t> labels = std::vector<int32_t>(kSamples);
  data::Dataset<float> set;

  ImageSet() {
    for (Index i = 0; i < kSamples; ++i) {
      for (Index v = 0; v < kFeatures; ++v) x[i * kFeatures + v] = static_cast<float>(i) + static_cast<float>(v) / 100;
      labels[i] = static_cast<int32_t>(i % 3);
    }
    set.name = "images";
    set.samples = kSamples;
    set.features = kFeatures;
    set.shape = {1, 4, 6};
    set.classes = 3;
    set.x = x.data();
    set.labels = labels.data();
  }
};

data::Augmentation<float> augmentation() {
  std::vector<data::AugmentSpec> specs(3);
  specs[0].type = data::AugmentType::kRandomCrop;
  specs[0].padding = 1;
  specs[1].type = data::AugmentType::kHorizontalFlip;
  specs[2].type = data::AugmentType::kGaussianNoise;
  specs[2].std = 0.1;
  return data::Augmentation<float>(specs, {1, 4, 6});
}

constexpr Index kCapacity = 12;

BatchBuffers<float> buffers() {
  return BatchBuffers<float>(kCapacity, ImageSet::kFeatures, InputKind::kValues, 0, 1);
}

// Columns [first, first + count) of `held` hold the bits a synchronous gather of `samples` gives.
void expect_same_bits(const BatchBuffers<float>& held, Index first, const ImageSet& data,
                      const std::vector<Index>& samples, uint64_t seed, int64_t epoch) {
  BatchBuffers<float> direct = buffers();
  data::Augmentation<float> own = augmentation();
  const Index count = static_cast<Index>(samples.size());
  direct.gather_training(data.set, samples.data(), count, own, seed, epoch);
  const nn::BatchInput<float> a = held.input(first, count), b = direct.input(0, count);
  EXPECT_EQ(std::memcmp(a.values, b.values, sizeof(float) * ImageSet::kFeatures * count), 0);
  const nn::BatchTargets<float> ta = held.targets(first), tb = direct.targets(0);
  EXPECT_EQ(std::memcmp(ta.labels, tb.labels, sizeof(int32_t) * count), 0);
}

std::vector<Index> consecutive(Index first, Index count) {
  std::vector<Index> samples(static_cast<size_t>(count));
  std::iota(samples.begin(), samples.end(), first);
  return samples;
}

TEST(BatchPrefetcher, TakesTheBatchAskedForWithTheBitsOfASynchronousGather) {
  ImageSet data;
  BatchPrefetcher<float> prefetcher(data.set, augmentation(), buffers());
  const std::vector<Index> samples = {17, 3, 39, 0, 22, 5, 8, 31};
  prefetcher.request(samples.data(), 8, 7, 2);
  BatchBuffers<float> mine = buffers();
  ASSERT_TRUE(prefetcher.take(samples.data(), 8, 7, 2, mine));
  EXPECT_EQ(prefetcher.taken(), 1);
  EXPECT_EQ(mine.contents().count, 8);
  EXPECT_EQ(mine.contents().find(samples.data(), 8, 7, 2), 0);
  expect_same_bits(mine, 0, data, samples, 7, 2);
  // Taken once: a second take finds nothing.
  EXPECT_FALSE(prefetcher.take(samples.data(), 8, 7, 2, mine));
}

TEST(BatchPrefetcher, OtherSamplesSeedOrEpochFindNothing) {
  ImageSet data;
  BatchPrefetcher<float> prefetcher(data.set, augmentation(), buffers());
  BatchBuffers<float> mine = buffers();
  const std::vector<Index> samples = consecutive(10, 6), shifted = consecutive(11, 6);
  EXPECT_FALSE(prefetcher.take(samples.data(), 6, 7, 0, mine));  // nothing asked for
  prefetcher.request(samples.data(), 6, 7, 0);
  EXPECT_FALSE(prefetcher.take(samples.data(), 6, 8, 0, mine));   // another seed
  EXPECT_FALSE(prefetcher.take(samples.data(), 6, 7, 1, mine));   // another epoch
  EXPECT_FALSE(prefetcher.take(shifted.data(), 6, 7, 0, mine));   // one sample more, one less
  EXPECT_EQ(prefetcher.taken(), 0);
  // A run of the batch's columns is taken: samples 12..14 lie at columns 2..4.
  ASSERT_TRUE(prefetcher.take(samples.data() + 2, 3, 7, 0, mine));
  EXPECT_EQ(mine.contents().find(samples.data() + 2, 3, 7, 0), 2);
  expect_same_bits(mine, 0, data, samples, 7, 0);
}

TEST(BatchPrefetcher, ARequestWaitsWhileTheWorkersBuffersHoldABatch) {
  ImageSet data;
  BatchPrefetcher<float> prefetcher(data.set, augmentation(), buffers());
  BatchBuffers<float> mine = buffers();
  const std::vector<Index> first = consecutive(0, 12), second = consecutive(20, 12), third = consecutive(5, 4);
  prefetcher.request(first.data(), 12, 1, 0);
  prefetcher.request(third.data(), 4, 1, 0);   // waits ...
  prefetcher.request(second.data(), 12, 1, 0);  // ... and is replaced
  EXPECT_FALSE(prefetcher.take(second.data(), 12, 1, 0, mine));  // not before the first is taken
  ASSERT_TRUE(prefetcher.take(first.data(), 12, 1, 0, mine));
  expect_same_bits(mine, 0, data, first, 1, 0);
  ASSERT_TRUE(prefetcher.take(second.data(), 12, 1, 0, mine));  // started by the first take
  expect_same_bits(mine, 0, data, second, 1, 0);
  EXPECT_FALSE(prefetcher.take(third.data(), 4, 1, 0, mine));
  EXPECT_EQ(prefetcher.taken(), 2);
  // A batch in flight when the prefetcher goes: its destructor waits for it.
  prefetcher.request(third.data(), 4, 1, 0);
}

TEST(BatchPrefetcher, TheWorkersFailureReachesTake) {
  ImageSet data;
  BatchPrefetcher<float> prefetcher(data.set, augmentation(), buffers());
  BatchBuffers<float> mine = buffers();
  const std::vector<Index> samples = consecutive(0, 4);
  const int64_t epoch = int64_t{1} << 33;  // beyond the augmentation's counter
  prefetcher.request(samples.data(), 4, 1, epoch);
  EXPECT_THROW(prefetcher.take(samples.data(), 4, 1, epoch, mine), Error);
  EXPECT_EQ(mine.contents().count, 0);  // what the failed gather left holds nothing
  // The worker goes on.
  prefetcher.request(samples.data(), 4, 1, 0);
  ASSERT_TRUE(prefetcher.take(samples.data(), 4, 1, 0, mine));
  expect_same_bits(mine, 0, data, samples, 1, 0);
}

// Note [a part of a held batch]: 96 bytes a column, so a part at an even column lies on a
// 64-byte boundary (2 x 96 = 3 x 64) and is read in place; at an odd one it moves to column 0,
// and the columns after it stay as they were.
TEST(BatchBuffers, APartIsReadInPlaceOnlyOnTheBuffersAlignment) {
  ImageSet data;
  data::Augmentation<float> own = augmentation();
  BatchBuffers<float> held = buffers();
  const std::vector<Index> samples = {9, 4, 33, 12, 0, 27, 15, 38, 2, 21};
  held.gather_training(data.set, samples.data(), 10, own, 5, 1);
  EXPECT_EQ(held.place(4, 3), 4);  // 4 x 96 bytes: in place
  expect_same_bits(held, 4, data, {0, 27, 15}, 5, 1);
  EXPECT_EQ(held.place(3, 4), 0);  // 3 x 96 bytes: moved
  expect_same_bits(held, 0, data, {12, 0, 27, 15}, 5, 1);
  expect_same_bits(held, 4, data, {0, 27, 15, 38, 2, 21}, 5, 1);
  const BatchContents& contents = held.contents();
  const std::vector<Index> now = {12, 0, 27, 15, 0, 27, 15, 38, 2, 21};
  EXPECT_EQ(std::vector<Index>(contents.samples.begin(), contents.samples.begin() + 10), now);
  // Equal samples are equal bits: a run is found wherever it lies.
  EXPECT_EQ(contents.find(now.data() + 5, 5, 5, 1), 5);
  EXPECT_EQ(contents.find(now.data() + 1, 3, 5, 1), 1);
  // An evaluation's gather holds no training batch.
  held.gather(data.set, samples.data(), 4);
  EXPECT_EQ(held.contents().find(samples.data(), 4, 5, 1), -1);
}

}  // namespace
}  // namespace mpiddp::train
