// The gradient reducer on every reduction path, at the launcher's world size N: closed-form
// means, bit-identical results on every rank, and the overlapped form equal to the blocking
// one. With MPIDDP_TEST_RANKS_PER_NODE=k (see tests/CMakeLists.txt) the shared-memory path
// runs as if every k ranks were one node, which exercises its cross-node step.
#include "mpiddp/distributed/gradient_reducer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "mpiddp/core/hash.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "../support/reducer_checks.hpp"

namespace mpiddp::distributed {
namespace {

// Rank r holds (r + 1) * (i % 7 + 1) at element i. The sum over N ranks is
// (i % 7 + 1) * N (N + 1) / 2, and the mean (i % 7 + 1) * (N + 1) / 2: small integers and
// halves, exact in float, so the comparison is exact.
template <typename T>
std::vector<T> rank_values(int rank, size_t count) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>((rank + 1) * static_cast<int>(i % 7 + 1));
  return v;
}

template <typename T>
void expect_mean(const std::vector<T>& v, int world) {
  for (size_t i = 0; i < v.size(); ++i) {
    const T expected = static_cast<T>((i % 7 + 1) * (world + 1)) / T(2);
    ASSERT_EQ(v[i], expected) << "element " << i;
  }
}

using test::expect_identical_on_every_rank;

class ReducerPaths : public ::testing::TestWithParam<std::string> {};

// Buckets of ~262 floats first, then ~2621: a buffer of some thousand values has many.
ReduceConfig small_buckets(const std::string& algorithm) {
  ReduceConfig config;
  config.algorithm = algorithm;
  config.first_bucket_mb = 0.001;
  config.bucket_cap_mb = 0.01;
  return config;
}

TEST_P(ReducerPaths, BlockingReduceGivesTheMean) {
  MpiCommunicator comm;
  GradientReducer<float> reducer(comm, small_buckets(GetParam()));
  reducer.set_tensor_begins({0, 1000, 1003, 4000});
  for (size_t count : {size_t{1}, size_t{13}, size_t{4001}, size_t{100003}}) {
    auto v = rank_values<float>(comm.rank(), count);
    reducer.reduce(v.data(), count);
    expect_mean(v, comm.size());
    expect_identical_on_every_rank(comm, v);
  }
}

TEST_P(ReducerPaths, DoubleAndOneBigBucket) {
  MpiCommunicator comm;
  ReduceConfig config;
  config.algorithm = GetParam();
  GradientReducer<double> reducer(comm, config);
  // 9 Mi doubles = 72 MiB: many times the shared-memory segment (4 MiB), so the
  // shared path goes in pieces; three 25 MiB buckets.
  const size_t count = size_t{9} << 20;
  auto v = rank_values<double>(comm.rank(), count);
  reducer.reduce(v.data(), count);
  expect_mean(v, comm.size());
  expect_identical_on_every_rank(comm, v);
}

TEST_P(ReducerPaths, OverlappedEqualsBlocking) {
  MpiCommunicator comm;
  ReduceConfig config;
  config.algorithm = GetParam();
  config.first_bucket_mb = 0.0005;
  config.bucket_cap_mb = 0.002;
  GradientReducer<float> reducer(comm, config);
  const std::vector<size_t> layers{0, 2000, 2100, 5000};
  reducer.set_tensor_begins(layers);
  const size_t count = 6001;
  auto blocking = rank_values<float>(comm.rank(), count);
  reducer.reduce(blocking.data(), count);
  // As backward does: the tail first, then layer by layer towards the start; the values
  // of a layer are written only just before it is announced ready.
  auto overlapped = std::vector<float>(count, -1.0f);
  test::reduce_as_backward_does(reducer, overlapped, rank_values<float>(comm.rank(), count), layers);
  EXPECT_EQ(overlapped, blocking);
  EXPECT_GT(reducer.buckets().size(), 3u);
}

TEST_P(ReducerPaths, BufferInSharedMemoryIsSummedWhereItLies) {
  // The trainer keeps its gradients in allocate_shared_buffer's memory on the shm path
  // (Note [gradients in the shared window]); buckets are pieces of it at offsets.
  MpiCommunicator comm;
  GradientReducer<float> reducer(comm, small_buckets(GetParam()));
  reducer.set_tensor_begins({0, 1000, 1003, 4000});
  const size_t count = 100003;
  float* shared = reducer.allocate_shared_buffer(count);
  const bool expect_shared = reducer.algorithm() == ReduceAlgorithm::kShm && comm.size() > 1;
  ASSERT_EQ(shared != nullptr, expect_shared);
  if (!shared) GTEST_SKIP() << "this path keeps the caller's memory";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(shared) % 64, 0u) << "as aligned as the model's own buffers";
  for (int round = 0; round < 2; ++round) {  // the buffer is reused, as in every step
    const auto values = rank_values<float>(comm.rank(), count);
    std::copy(values.begin(), values.end(), shared);
    reducer.reduce(shared, count);
    const std::vector<float> result(shared, shared + count);
    expect_mean(result, comm.size());
    expect_identical_on_every_rank(comm, result);
    EXPECT_GT(reducer.buckets().size(), 3u);
  }
}

TEST_P(ReducerPaths, SumsTellWhetherTheyAreFinite) {
  // Note [the finite check in the sum]: in the node's shared window each rank checks the
  // sums it computes, on the mpi path each rank its scaled copy, and agreed_finite gives
  // every rank the same answer; the shm path's staging window cannot tell.
  MpiCommunicator comm;
  GradientReducer<float> reducer(comm, small_buckets(GetParam()));
  reducer.set_tensor_begins({0, 1000, 1003, 4000});
  const size_t count = 100003;
  float* shared = reducer.allocate_shared_buffer(count);
  std::vector<float> own(count);
  float* const buffers[] = {shared, own.data()};
  for (float* grads : buffers) {
    if (grads == nullptr) continue;
    const bool checked =
        comm.size() > 1 && (grads == shared || reducer.algorithm() == ReduceAlgorithm::kMpi);
    auto reduce_with = [&](size_t at, float value) {
      const auto values = rank_values<float>(comm.rank(), count);
      std::copy(values.begin(), values.end(), grads);
      if (at < count) grads[at] = value;
      reducer.reduce(grads, count);
      return reducer.agreed_finite();
    };
    const auto finite = reduce_with(count, 0.0f);
    ASSERT_EQ(finite.has_value(), checked);
    if (!checked) continue;
    EXPECT_TRUE(*finite);
    // A NaN on the last rank near the buffer's start, in a slice node rank 0 sums; then finite
    // values whose sum overflows (every rank's 3e38 at the buffer's last element).
    if (comm.rank() == comm.size() - 1) {
      EXPECT_EQ(reduce_with(5, std::numeric_limits<float>::quiet_NaN()), std::optional<bool>(false));
    } else {
      EXPECT_EQ(reduce_with(count, 0.0f), std::optional<bool>(false));
    }
    EXPECT_EQ(reduce_with(count - 1, 3e38f), std::optional<bool>(false));
    EXPECT_EQ(reduce_with(count, 0.0f), std::optional<bool>(true)) << "each reduction is judged anew";
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ReducerPaths, ::testing::Values("mpi", "shm", "auto"));

TEST(Reducer, AutoChoosesSharedMemoryOnOneNode) {
  MpiCommunicator comm;
  GradientReducer<float> reducer(comm);
  const ReduceAlgorithm expected =
      comm.ranks_on_node() > 1 ? ReduceAlgorithm::kShm : ReduceAlgorithm::kMpi;
  EXPECT_EQ(reducer.algorithm(), expected);
  EXPECT_GE(comm.ranks_on_node(), 1);
  EXPECT_LE(comm.ranks_on_node(), comm.size());
}

}  // namespace
}  // namespace mpiddp::distributed
