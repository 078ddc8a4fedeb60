// The reduce-scatter of the optimizer sharded across the leaders (GradientReducer::
// scatter_into_parts over Communicator::start_scattered_sum), at the launcher's world size N:
// rank r's part holds the scaled sum of every rank's values added in rank order, bit for bit,
// with buckets that cut the parts anywhere, parts of any size (one empty), blocking and
// overlapped alike, in float and double, step after step on reused buffers.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mpiddp/distributed/gradient_reducer.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "../support/reducer_checks.hpp"

namespace mpiddp::distributed {
namespace {

// Rank r's value at element i of step s: a pseudo-random number in [-1, 1) with all its
// mantissa bits in use, so that another order of the sum would round otherwise.
template <typename T>
T value(int rank, size_t i, int step) {
  uint64_t x = (static_cast<uint64_t>(rank) << 40) ^ (static_cast<uint64_t>(step) << 32) ^ i;
  x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ULL;
  x = (x ^ (x >> 27)) * 0x81dadef4bc2dd44dULL;
  x ^= x >> 33;
  return static_cast<T>(static_cast<double>(x >> 11) * 0x1.0p-52 - 1.0);
}

template <typename T>
std::vector<T> rank_values(int rank, size_t count, int step) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = value<T>(rank, i, step);
  return v;
}

// Parts of unequal size: rank r owns [begins[r], begins[r + 1]); with N >= 3 rank 1's is empty.
std::vector<size_t> uneven_parts(int world, size_t count) {
  std::vector<size_t> begins{0};
  for (int r = 1; r < world; ++r)
    begins.push_back(r == 2 ? begins.back() : count * static_cast<size_t>(r * r) / static_cast<size_t>(world * world));
  begins.push_back(count);
  return begins;
}

// This rank's part holds ((v_0 + v_1) + ... + v_{N-1}) * (1/N), rounded as the shared-memory
// sum rounds it (in T, the scale as T).
template <typename T>
void expect_own_part_summed_in_rank_order(const Communicator& comm, const std::vector<T>& result,
                                          const std::vector<size_t>& begins, int step) {
  const auto r = static_cast<size_t>(comm.rank());
  const T scale = static_cast<T>(1.0 / comm.size());
  for (size_t i = begins[r]; i < begins[r + 1]; ++i) {
    T sum = value<T>(0, i, step);
    for (int q = 1; q < comm.size(); ++q) sum += value<T>(q, i, step);
    ASSERT_EQ(result[i], sum * scale) << "element " << i << " of rank " << r << "'s part, step " << step;
  }
}

// A reducer of small buckets over these tensors that scatters the sum into the parts.
template <typename T>
GradientReducer<T> scattering_reducer(MpiCommunicator& comm, const std::vector<size_t>& tensors,
                                      const std::vector<size_t>& parts) {
  ReduceConfig config;
  config.algorithm = "mpi";
  config.first_bucket_mb = 0.001;  // ~262 floats
  config.bucket_cap_mb = 0.004;
  GradientReducer<T> reducer(comm, config);
  reducer.set_tensor_begins(tensors);
  reducer.scatter_into_parts(parts);
  return reducer;
}

TEST(ScatteredSum, EachRankHoldsItsPartSummedInRankOrder) {
  MpiCommunicator comm;
  const std::vector<size_t> tensors{0, 1000, 1003, 4000};
  const size_t count = 10007;
  const auto begins = uneven_parts(comm.size(), count);
  auto reducer = scattering_reducer<float>(comm, tensors, begins);
  ASSERT_TRUE(reducer.scatters());
  std::vector<float> grads(count);
  for (int step = 0; step < 3; ++step) {  // the slots are reused, as in every step
    grads = rank_values<float>(comm.rank(), count, step);
    reducer.reduce(grads.data(), count);
    expect_own_part_summed_in_rank_order(comm, grads, begins, step);
  }
  EXPECT_GT(reducer.buckets().size(), 5u) << "buckets that cut the parts";
}

TEST(ScatteredSum, OverlappedAsBlockingInDouble) {
  MpiCommunicator comm;
  const std::vector<size_t> tensors{0, 2000, 2100, 5000};
  const size_t count = 6001;
  const auto begins = uneven_parts(comm.size(), count);
  auto reducer = scattering_reducer<double>(comm, tensors, begins);
  std::vector<double> grads(count, -1.0);
  test::reduce_as_backward_does(reducer, grads, rank_values<double>(comm.rank(), count, 7), tensors);
  expect_own_part_summed_in_rank_order(comm, grads, begins, 7);
}

}  // namespace
}  // namespace mpiddp::distributed
