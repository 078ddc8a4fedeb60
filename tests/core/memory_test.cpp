#include "mpiddp/core/memory.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace mpiddp {
namespace {

TEST(Memory, SmallBuffersAreCacheLineAligned) {
  void* p = allocate_buffer(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(p, 1, 100);
  free_buffer(p, 100);
}

TEST(Memory, BigBuffersStartOnAHugePage) {
  const size_t bytes = (size_t{3} << 20) + 5;  // 3 MiB + 5: rounded up inside
  void* p = allocate_buffer(bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20), 0u);
  std::memset(p, 1, bytes);
  free_buffer(p, bytes);
}

TEST(Memory, AllocatorWorksInAVector) {
  std::vector<float, HugePageAllocator<float>> v(1 << 20, 2.0f);  // 4 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % (size_t{2} << 20), 0u);
  EXPECT_EQ(v[12345], 2.0f);
}

// The resident set now, in MiB (the second field of /proc/self/statm, in pages).
double resident_mb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * 4096.0 / (1024.0 * 1024.0);
}

TEST(Memory, AFreedBigBufferLeavesTheResidentSet) {
  // The gradients give up their own buffer when they move to shared memory; under
  // configure_allocator's never-trimmed heap that memory would stay resident.
  configure_allocator();
  const size_t bytes = size_t{32} << 20;
  void* p = allocate_buffer(bytes);
  std::memset(p, 1, bytes);
  const double touched = resident_mb();
  free_buffer(p, bytes);
  EXPECT_LT(resident_mb(), touched - 30.0);
}

// Whether the kernel gives transparent huge pages to memory that asks (madvise or always).
bool huge_pages_on_request() {
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(mode, line);
  return line.find("[never]") == std::string::npos && !line.empty();
}

TEST(Memory, ABigBufferHoldsWhatItUsesNotAWholeLastHugePage) {
  // Without huge pages every buffer holds what it uses anyway: nothing to tell apart.
  if (!huge_pages_on_request()) GTEST_SKIP() << "transparent huge pages are off";
  // 3 MiB + 5 bytes, all written: one 2 MiB huge page and 1 MiB + 5 bytes of 4 KiB pages.
  // Mapped in whole huge pages, the last one would be resident whole: 4 MiB. The margins
  // (0.5 MiB each way) cover the kernel's per-CPU lag in counting resident pages.
  const size_t bytes = (size_t{3} << 20) + 5;
  const double before = resident_mb();
  void* p = allocate_buffer(bytes);
  std::memset(p, 1, bytes);
  const double grew = resident_mb() - before;
  free_buffer(p, bytes);
  EXPECT_GE(grew, 2.5);
  EXPECT_LT(grew, 3.5);
}

TEST(Memory, UntouchedZerosAreZeroAndCostNothingUntilWritten) {
  const size_t count = size_t{8} << 20;  // 32 MiB of floats
  const double before = resident_mb();
  UntouchedZeros<float> big(count);
  EXPECT_LT(resident_mb(), before + 4.0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % 64, 0u);
  big.data()[count - 1] = 1.0f;
  EXPECT_EQ(big.data()[0], 0.0f);
  UntouchedZeros<double> small(10);  // from the heap: zeroed explicitly
  for (int i = 0; i < 10; ++i) EXPECT_EQ(small.data()[i], 0.0);
}

TEST(Memory, PeakRssCoversWhatWasTouched) {
  const double before = peak_rss_mb();
  std::vector<char, HugePageAllocator<char>> v(size_t{64} << 20, 1);  // 64 MiB, touched
  EXPECT_GE(peak_rss_mb(), before);
  EXPECT_GE(peak_rss_mb(), 64.0);
}

}  // namespace
}  // namespace mpiddp
