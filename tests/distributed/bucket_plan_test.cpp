#include "mpiddp/distributed/bucket_plan.hpp"

#include <gtest/gtest.h>

namespace mpiddp::distributed {
namespace {

std::vector<std::pair<size_t, size_t>> ranges(const std::vector<Bucket>& plan) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const Bucket& b : plan) out.emplace_back(b.begin, b.end);
  return out;
}

using Ranges = std::vector<std::pair<size_t, size_t>>;

TEST(BucketPlan, KeepsTensorsWholeFromTheEnd) {
  // Tensors [0,100) [100,120) [120,400) [400,410) + the loss slot [410,411); float (4 bytes).
  // First cap 200 B = 50 elements: takes [410,411) and [400,410) (11 elements), not [120,400).
  // Cap 1600 B = 400 elements: [0,400) fits whole.
  const auto plan = plan_buckets({0, 100, 120, 400, 410}, 411, 4, 200, 1600);
  EXPECT_EQ(ranges(plan), (Ranges{{400, 411}, {0, 400}}));
}

TEST(BucketPlan, CutsATensorLargerThanTheCap) {
  // One tensor of 1000 elements, float; caps 100 and 400 elements: pieces from the end.
  const auto plan = plan_buckets({0}, 1000, 4, 400, 1600);
  EXPECT_EQ(ranges(plan), (Ranges{{900, 1000}, {500, 900}, {100, 500}, {0, 100}}));
}

TEST(BucketPlan, MlpLayoutWithDefaultCaps) {
  // 784-1024-1024-10 (PyTorch DDP's defaults: 1 MiB first bucket, 25 MiB after) plus the
  // loss slot: tensor starts 0 (0.weight), 802816 (0.bias), 803840 (2.weight),
  // 1852416 (2.bias), 1853440 (4.weight), 1863680 (4.bias), 1863690 (loss).
  const std::vector<size_t> begins{0, 802816, 803840, 1852416, 1853440, 1863680, 1863690};
  const auto plan = plan_buckets(begins, 1863691, 4, 1 << 20, 25 << 20);
  // First bucket: loss, 4.bias, 4.weight, 2.bias = 1863691 - 1852416 = 11275 elements
  // (45 KB); adding 2.weight (4 MiB) would pass 1 MiB. The rest, 7.4 MB, fits in 25 MiB.
  EXPECT_EQ(ranges(plan), (Ranges{{1852416, 1863691}, {0, 1852416}}));
}

TEST(BucketPlan, CoversTheBufferOnceInDescendingOrder) {
  const std::vector<size_t> begins{0, 7, 300, 301, 5000, 5003};
  for (size_t cap : {4, 64, 1000, 100000}) {
    const auto plan = plan_buckets(begins, 6000, 8, cap, cap * 3);
    size_t expected_end = 6000;
    for (const Bucket& b : plan) {
      EXPECT_EQ(b.end, expected_end) << "cap " << cap;
      EXPECT_LT(b.begin, b.end);
      expected_end = b.begin;
    }
    EXPECT_EQ(expected_end, 0u) << "cap " << cap;
  }
}

TEST(BucketPlan, EmptyBufferHasNoBuckets) { EXPECT_TRUE(plan_buckets({0}, 0, 4, 64, 64).empty()); }

}  // namespace
}  // namespace mpiddp::distributed
