#include "mpiddp/core/memory.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace mpiddp {
namespace {

TEST(Memory, SmallBuffersAreCacheLineAligned) {
  void* p = allocate_buffer(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(p, 1, 100);
  free_buffer(p);
}

TEST(Memory, BigBuffersStartOnAHugePage) {
  const size_t bytes = (size_t{3} << 20) + 5;  // 3 MiB + 5: rounded up inside
  void* p = allocate_buffer(bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20), 0u);
  std::memset(p, 1, bytes);
  free_buffer(p);
}

TEST(Memory, AllocatorWorksInAVector) {
  std::vector<float, HugePageAllocator<float>> v(1 << 20, 2.0f);  // 4 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % (size_t{2} << 20), 0u);
  EXPECT_EQ(v[12345], 2.0f);
}

TEST(Memory, PeakRssCoversWhatWasTouched) {
  const double before = peak_rss_mb();
  std::vector<char, HugePageAllocator<char>> v(size_t{64} << 20, 1);  // 64 MiB, touched
  EXPECT_GE(peak_rss_mb(), before);
  EXPECT_GE(peak_rss_mb(), 64.0);
}

}  // namespace
}  // namespace mpiddp
