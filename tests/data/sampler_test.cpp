#include "mpiddp/data/sampler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace mpiddp::data {
namespace {

std::vector<std::vector<Index>> shards(Index n, int world, bool drop_last, int64_t epoch = 0) {
  std::vector<std::vector<Index>> all;
  for (int r = 0; r < world; ++r) {
    DistributedSampler s(n, r, world, true, drop_last, 42);
    s.set_epoch(epoch);
    all.push_back(s.indices());
  }
  return all;
}

TEST(Sampler, ShardsAreDisjointAndCoverWhenDivisible) {
  for (int world : {1, 2, 4, 8}) {
    const auto all = shards(64, world, false);
    std::multiset<Index> seen;
    for (const auto& s : all) {
      EXPECT_EQ(s.size(), 64u / world);
      seen.insert(s.begin(), s.end());
    }
    EXPECT_EQ(seen.size(), 64u);
    EXPECT_EQ(std::set<Index>(seen.begin(), seen.end()).size(), 64u) << "world " << world;
  }
}

TEST(Sampler, PaddingRepeatsTheHeadOfTheOrder) {
  // 10 samples on 4 ranks: padded to 12 with order[0], order[1] (DistributedSampler).
  const auto order = epoch_order(10, true, 42, 0);
  const auto all = shards(10, 4, false);
  for (const auto& s : all) EXPECT_EQ(s.size(), 3u);
  // positions 10 and 11 belong to ranks 2 and 3, third slot
  EXPECT_EQ(all[2][2], order[0]);
  EXPECT_EQ(all[3][2], order[1]);
  EXPECT_EQ(all[0][0], order[0]);
  EXPECT_EQ(all[1][2], order[9]);
}

TEST(Sampler, DropLastTruncates) {
  const auto order = epoch_order(10, true, 42, 0);
  const auto all = shards(10, 4, true);
  std::set<Index> seen;
  for (const auto& s : all) {
    EXPECT_EQ(s.size(), 2u);
    seen.insert(s.begin(), s.end());
  }
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_FALSE(seen.count(order[8]));
  EXPECT_FALSE(seen.count(order[9]));
}

TEST(Sampler, SameOrderOnEveryRankNewOrderEachEpoch) {
  EXPECT_EQ(epoch_order(100, true, 7, 3), epoch_order(100, true, 7, 3));
  EXPECT_NE(epoch_order(100, true, 7, 3), epoch_order(100, true, 7, 4));
  EXPECT_NE(epoch_order(100, true, 7, 3), epoch_order(100, true, 8, 3));
  auto sorted = epoch_order(100, true, 7, 3);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, epoch_order(100, false, 7, 3));  // a permutation of 0..99
}

TEST(Sampler, WithoutShuffleIsTheIdentity) {
  const auto order = epoch_order(5, false, 7, 9);
  EXPECT_EQ(order, (std::vector<Index>{0, 1, 2, 3, 4}));
}

TEST(Sampler, UnionOfKthRankBatchesIsTheKthSingleProcessBatch) {
  const Index n = 256, global_batch = 64;
  for (int world : {2, 4}) {
    for (int64_t epoch : {0, 1, 5}) {
      const auto single = shards(n, 1, false, epoch)[0];
      const auto all = shards(n, world, false, epoch);
      const Index b = global_batch / world;
      for (Index k = 0; k < n / global_batch; ++k) {
        std::set<Index> union_of_ranks, single_batch(single.begin() + k * global_batch,
                                                     single.begin() + (k + 1) * global_batch);
        for (const auto& s : all) union_of_ranks.insert(s.begin() + k * b, s.begin() + (k + 1) * b);
        EXPECT_EQ(union_of_ranks, single_batch) << "world " << world << " batch " << k;
      }
    }
  }
}

TEST(Sampler, ReplayOrderIsSplitLikeTheOwnOrder) {
  const std::vector<Index> replay = {5, 3, 1, 0, 2, 4, 7, 6};
  DistributedSampler r1(8, 1, 2, true, false, 0);
  r1.set_epoch(0, &replay);
  EXPECT_EQ(r1.indices(), (std::vector<Index>{3, 0, 4, 6}));
  EXPECT_EQ(r1.indices(), shard_order(replay, 1, 2, false));
}

}  // namespace
}  // namespace mpiddp::data
