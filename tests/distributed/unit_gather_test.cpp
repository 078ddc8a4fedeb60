// ZeRO-3's gather of a unit's parameters (Communicator::start_gather): each rank holds its
// part (world_part()) of a buffer cut at arbitrary bytes (one part empty with N >= 3); once
// waited for, every rank holds every part, bit for bit, and the memory around the buffer is
// untouched. Two
// gathers in flight at once, waited in the other order, and step after step on reused
// handles. Run at N = 1, 2, 4, as 2 emulated nodes of 2 and as 4 emulated nodes of one, where
// world_part() differs from the world rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "mpiddp/distributed/mpi_communicator.hpp"

namespace mpiddp::distributed {
namespace {

// Element i as written by the owner of its part at step s: distinct for every i, s and part.
float owned_value(size_t part, size_t i, int step) {
  return static_cast<float>(part * 100000 + i) + 0.25f * static_cast<float>(step);
}

// Parts of `count` floats in bytes: uneven, part 1 empty at N >= 3.
std::vector<size_t> part_bytes(int world, size_t count) {
  std::vector<size_t> begins{0};
  for (int p = 1; p < world; ++p)
    begins.push_back(p == 2 ? begins.back() : count * static_cast<size_t>(p * p) / static_cast<size_t>(world * world));
  begins.push_back(count);
  for (size_t& b : begins) b *= sizeof(float);
  return begins;
}

// Guard values on either side of the gathered buffer, which no gather may write.
constexpr size_t kGuard = 8;
constexpr float kGuardValue = -7.5f;

// The buffer as this rank holds it before the gather, at kGuard: its own part written, the
// rest NaN, the guards around it.
std::vector<float> own_part_only(Communicator& comm, const std::vector<size_t>& begins, int step) {
  const size_t count = begins.back() / sizeof(float);
  std::vector<float> data(count + 2 * kGuard, std::numeric_limits<float>::quiet_NaN());
  std::fill_n(data.begin(), kGuard, kGuardValue);
  std::fill_n(data.end() - kGuard, kGuard, kGuardValue);
  const auto p = static_cast<size_t>(comm.world_part());
  for (size_t i = begins[p] / sizeof(float); i < begins[p + 1] / sizeof(float); ++i)
    data[kGuard + i] = owned_value(p, i, step);
  return data;
}

void expect_every_part(const std::vector<float>& data, const std::vector<size_t>& begins, int step) {
  for (size_t p = 0; p + 1 < begins.size(); ++p)
    for (size_t i = begins[p] / sizeof(float); i < begins[p + 1] / sizeof(float); ++i)
      ASSERT_EQ(data[kGuard + i], owned_value(p, i, step)) << "part " << p << ", element " << i << ", step " << step;
  for (size_t g = 0; g < kGuard; ++g) {
    ASSERT_EQ(data[g], kGuardValue) << "guard before, " << g;
    ASSERT_EQ(data[data.size() - 1 - g], kGuardValue) << "guard after, " << g;
  }
}

TEST(UnitGather, EveryRankHoldsEveryPart) {
  MpiCommunicator comm;
  for (const size_t count : {size_t{1000}, size_t{3}}) {  // 3: fewer elements than ranks at N = 4
    const std::vector<size_t> begins = part_bytes(comm.size(), count);
    std::vector<float> data = own_part_only(comm, begins, 0);
    const int handle = comm.start_gather(data.data() + kGuard, begins);
    if (comm.size() == 1) {
      EXPECT_EQ(handle, -1);  // one part: held already
    }
    comm.wait_gather(handle);
    expect_every_part(data, begins, 0);
  }
}

TEST(UnitGather, TwoInFlightWaitedInTheOtherOrderStepAfterStep) {
  MpiCommunicator comm;
  const std::vector<size_t> first = part_bytes(comm.size(), 4097), second = part_bytes(comm.size(), 555);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> a = own_part_only(comm, first, step), b = own_part_only(comm, second, step + 10);
    const int ha = comm.start_gather(a.data() + kGuard, first);
    const int hb = comm.start_gather(b.data() + kGuard, second);
    if (comm.size() > 1) {
      EXPECT_NE(ha, hb);
    }
    comm.progress();
    comm.wait_gather(hb);
    comm.wait_gather(ha);
    expect_every_part(a, first, step);
    expect_every_part(b, second, step + 10);
  }
}

}  // namespace
}  // namespace mpiddp::distributed
