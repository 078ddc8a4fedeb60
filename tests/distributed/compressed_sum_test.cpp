// reduce.compress "bf16" through the gradient reducer, at the launcher's world size N.
// Run as N ranks on one node (compression does not apply: results equal the uncompressed
// ones bit for bit), as 2 nodes of 2 (MPIDDP_TEST_RANKS_PER_NODE=2: the shared-memory
// path's step among the nodes in bf16), and as N nodes of 1 (=1: the flat path in bf16).
// Checked: the mean against a float64 reference within the bound of two bf16 roundings,
// replicas bit-identical, overlapped equal to blocking, and (MPIDDP_TEST_WIRE_BYTES=1,
// Open MPI over TCP) the bytes this rank writes to its sockets halved.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "mpiddp/distributed/gradient_reducer.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "../support/reducer_checks.hpp"

namespace mpiddp::distributed {
namespace {

// Rank r's gradient at element i: values of many magnitudes and both signs, not exact in
// bf16 (a fixed integer hash, the same on every build).
float value(int rank, size_t i) {
  uint64_t x = (static_cast<uint64_t>(rank) + 1) * 0x9e3779b97f4a7c15ull ^ (i * 0xbf58476d1ce4e5b9ull);
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  const double unit = static_cast<double>(x >> 11) * 0x1p-53;  // [0, 1)
  const double magnitude = std::ldexp(1.0 + unit, static_cast<int>(x % 16) - 8);
  return static_cast<float>((x & 1) ? -magnitude : magnitude);
}

std::vector<float> rank_values(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = value(rank, i);
  return v;
}

ReduceConfig config_for(const std::string& algorithm, const std::string& compress) {
  ReduceConfig c;
  c.algorithm = algorithm;
  c.compress = compress;
  c.first_bucket_mb = 0.001;  // many buckets, several in flight at once
  c.bucket_cap_mb = 0.01;
  return c;
}

using test::expect_identical_on_every_rank;

class Compressed : public ::testing::TestWithParam<std::string> {};

TEST_P(Compressed, MeanWithinTheBf16BoundOfAFloat64Reference) {
  MpiCommunicator comm;
  GradientReducer<float> reducer(comm, config_for(GetParam(), "bf16"));
  GradientReducer<float> plain(comm, config_for(GetParam(), "none"));
  const bool applied = reducer.compression() == Compression::kBf16;
  EXPECT_EQ(applied, comm.ranks_on_node() < comm.size());
  const size_t count = 40009;
  auto v = rank_values(comm.rank(), count);
  auto u = v;
  reducer.reduce(v.data(), count);
  plain.reduce(u.data(), count);
  expect_identical_on_every_rank(comm, v);
  if (!applied) {
    EXPECT_EQ(v, u) << "one node: compression must change nothing";
    return;
  }
  // Bound (Note [bf16 between nodes]): each node's partial sum s_n is rounded once
  // (<= 2^-8 |s_n|, and sum |s_n| <= sum |x_r|), the float32 sum of the N contributions,
  // scaled by 1/N, is rounded once (<= 2^-8 |mean|); the float32 sums add a few 2^-24.
  const double n = comm.size();
  size_t differ = 0;
  double worst = 0.0;
  for (size_t i = 0; i < count; ++i) {
    double mean = 0.0, magnitude = 0.0;
    for (int r = 0; r < comm.size(); ++r) {
      mean += value(r, i);
      magnitude += std::fabs(value(r, i));
    }
    mean /= n;
    magnitude /= n;
    const double bound = 0x1p-8 * (magnitude + std::fabs(mean)) + 16 * 0x1p-24 * magnitude;
    const double error = std::fabs(v[i] - mean);
    ASSERT_LE(error, bound) << "element " << i << ": " << v[i] << " against " << mean;
    worst = std::max(worst, error / bound);
    if (v[i] != u[i]) ++differ;
    // The result is a bf16: its low 16 bits are zero.
    uint32_t bits = 0;
    std::memcpy(&bits, &v[i], 4);
    ASSERT_EQ(bits & 0xffffu, 0u) << "element " << i << " was not rounded to bf16";
  }
  // Compression is on: most elements differ from the float32 sum, and the bound is not loose.
  EXPECT_GT(differ, count / 2);
  EXPECT_GT(worst, 0.1);
}

TEST_P(Compressed, OverlappedEqualsBlocking) {
  MpiCommunicator comm;
  GradientReducer<float> reducer(comm, config_for(GetParam(), "bf16"));
  const std::vector<size_t> layers{0, 2000, 2100, 5000};
  reducer.set_tensor_begins(layers);
  const size_t count = 6001;
  auto blocking = rank_values(comm.rank(), count);
  reducer.reduce(blocking.data(), count);
  std::vector<float> overlapped(count, -1.0f);
  test::reduce_as_backward_does(reducer, overlapped, rank_values(comm.rank(), count), layers);
  EXPECT_EQ(overlapped, blocking);
  expect_identical_on_every_rank(comm, overlapped);
}

TEST_P(Compressed, SharedGradientBufferReusedStepAfterStep) {
  MpiCommunicator comm;
  GradientReducer<float> reducer(comm, config_for(GetParam(), "bf16"));
  const size_t count = 30011;
  float* shared = reducer.allocate_shared_buffer(count);
  std::vector<float> own(count);
  float* grads = shared ? shared : own.data();
  std::vector<float> first;
  for (int round = 0; round < 3; ++round) {
    const auto values = rank_values(comm.rank(), count);
    std::copy(values.begin(), values.end(), grads);
    reducer.reduce(grads, count);
    const std::vector<float> result(grads, grads + count);
    expect_identical_on_every_rank(comm, result);
    if (round == 0) first = result;
    EXPECT_EQ(result, first) << "round " << round << ": the same input gives the same bits";
  }
}

TEST_P(Compressed, TheExactTailIsSummedUncompressed) {
  // The trainer's loss slot: the last element, inside the first bucket with the last
  // layer's gradients. It gets the float32 sum's bits; the rest stays compressed.
  MpiCommunicator comm;
  GradientReducer<float> reducer(comm, config_for(GetParam(), "bf16"));
  GradientReducer<float> plain(comm, config_for(GetParam(), "none"));
  const size_t count = 20001, tail = count - 1;
  for (GradientReducer<float>* r : {&reducer, &plain}) {
    r->set_tensor_begins({0, 12000, tail});
    r->keep_exact_from(tail);
  }
  auto v = rank_values(comm.rank(), count);
  auto u = v;
  reducer.reduce(v.data(), count);
  plain.reduce(u.data(), count);
  EXPECT_EQ(v[tail], u[tail]);
  if (reducer.compression() == Compression::kBf16) {
    uint32_t bits = 0;
    std::memcpy(&bits, &u[tail], 4);
    EXPECT_NE(bits & 0xffffu, 0u) << "the float32 mean happens to be a bf16: pick other values";
    std::memcpy(&bits, &v[tail - 1], 4);
    EXPECT_EQ(bits & 0xffffu, 0u) << "the element before the tail is compressed";
  }
  expect_identical_on_every_rank(comm, v);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, Compressed, ::testing::Values("mpi", "shm", "auto"));

// Bytes this process has written (sockets included) since it started: /proc/self/io.
uint64_t bytes_written() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value)
    if (key == "wchar:") return value;
  return 0;
}

TEST(CompressedWire, BytesBetweenNodesAreHalved) {
  // Counted by the kernel, not by us: with Open MPI's TCP transport only (the ctest entry
  // sets OMPI_MCA_btl=self,tcp) every byte a rank sends to another goes through write().
  // Inside an emulated node the shm path sums through shared memory, so what is written is
  // the exchange between the nodes plus a few bytes of barriers.
  if (std::getenv("MPIDDP_TEST_WIRE_BYTES") == nullptr) GTEST_SKIP() << "set by its ctest entry";
  MpiCommunicator comm;
  if (comm.ranks_on_node() == comm.size()) GTEST_SKIP() << "needs more than one node";
  const size_t count = size_t{1} << 20;  // 4 MiB of float32
  uint64_t written[2] = {};
  const char* modes[2] = {"none", "bf16"};
  for (int m = 0; m < 2; ++m) {
    ReduceConfig config;
    config.algorithm = "auto";
    config.compress = modes[m];
    GradientReducer<float> reducer(comm, config);
    auto v = rank_values(comm.rank(), count);
    reducer.reduce(v.data(), count);  // warm-up: windows, connections
    comm.barrier();
    const uint64_t before = bytes_written();
    reducer.reduce(v.data(), count);
    written[m] = bytes_written() - before;
    comm.barrier();
  }
  const double ratio = static_cast<double>(written[1]) / static_cast<double>(written[0]);
  std::printf("rank %d: wrote %llu bytes uncompressed, %llu in bf16 (ratio %.3f)\n", comm.rank(),
              static_cast<unsigned long long>(written[0]), static_cast<unsigned long long>(written[1]),
              ratio);
  // At least the slice's bytes crossed uncompressed: the count is real, not zero.
  EXPECT_GE(written[0], count * sizeof(float) / static_cast<size_t>(comm.ranks_on_node()) / 2);
  EXPECT_GT(ratio, 0.45);
  EXPECT_LT(ratio, 0.55);
}

}  // namespace
}  // namespace mpiddp::distributed
