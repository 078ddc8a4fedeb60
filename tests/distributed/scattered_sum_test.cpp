// The reduce-scatter of the optimizer sharded across the world (GradientReducer::
// scatter_into_parts over Communicator::start_scattered_sum), at the launcher's world size N:
// rank r's part (world_part()) holds the scaled sum of every rank's values, bit for bit,
// added in rank order with one rank per node; with several (one node, or emulated nodes of
// 2 at N = 4) the node's values in node-rank order, in a buffer of the node's shared
// window, and then the nodes' sums in node order. With buckets that cut the parts anywhere
// (one bucket on nodes of several ranks), parts of any size (one empty), blocking and
// overlapped alike, in float and double, step after step on reused buffers. Among nodes of
// one rank, the plain kMpi sum built from it: the whole buffer in rank order on every rank,
// and a NaN in one rank's part agreed by all. Run at N = 1, 2, 4, as 2 emulated nodes of 2
// and as 4 emulated nodes of one (the MPI_Ialltoallv path).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
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

// The world rank of node rank s on node n: the one whose world part is s * nodes + n. The
// node's ranks are grouped by that n, which names the same node for every node rank on the
// emulated nodes these tests run on (MPIDDP_TEST_RANKS_PER_NODE cuts one host in world
// order); on real hosts with a placement that numbers them otherwise, it would not.
std::vector<std::vector<int>> ranks_by_node(Communicator& comm) {
  const int per_node = comm.ranks_on_node(), nodes = comm.size() / per_node;
  std::vector<std::vector<int>> ranks(static_cast<size_t>(nodes), std::vector<int>(static_cast<size_t>(per_node), -1));
  const auto parts = comm.allgather(static_cast<uint64_t>(comm.world_part()));
  for (size_t r = 0; r < parts.size(); ++r)
    ranks[parts[r] % static_cast<size_t>(nodes)][parts[r] / static_cast<size_t>(nodes)] = static_cast<int>(r);
  return ranks;
}

// This rank's part holds the node sums ((v_0 + v_1) + ... ), each over the node's ranks in
// node-rank order, added in node order and times 1/N, rounded as the sums round them (in T,
// the scale as T). With one rank per node that is every rank's value in rank order.
template <typename T>
void expect_own_part_summed_in_node_order(Communicator& comm, const std::vector<std::vector<int>>& nodes,
                                          const T* result, const std::vector<size_t>& begins, int step) {
  const auto p = static_cast<size_t>(comm.world_part());
  const T scale = static_cast<T>(1.0 / comm.size());
  for (size_t i = begins[p]; i < begins[p + 1]; ++i) {
    T sum = 0;
    for (size_t n = 0; n < nodes.size(); ++n) {
      T node_sum = value<T>(nodes[n][0], i, step);
      for (size_t s = 1; s < nodes[n].size(); ++s) node_sum += value<T>(nodes[n][s], i, step);
      sum = n == 0 ? node_sum : sum + node_sum;
    }
    ASSERT_EQ(result[i], sum * scale) << "element " << i << " of part " << p << ", step " << step;
  }
}

// A reducer of small buckets over these tensors that scatters the sum into the parts; with
// several ranks on a node, through the node's shared window (the only way they scatter).
template <typename T>
GradientReducer<T> scattering_reducer(MpiCommunicator& comm, const std::vector<size_t>& tensors,
                                      const std::vector<size_t>& parts) {
  ReduceConfig config;
  config.algorithm = comm.ranks_on_node() > 1 ? "shm" : "mpi";
  config.first_bucket_mb = 0.001;  // ~262 floats
  config.bucket_cap_mb = 0.004;
  GradientReducer<T> reducer(comm, config);
  reducer.set_tensor_begins(tensors);
  reducer.scatter_into_parts(parts);
  return reducer;
}

// The gradients' memory: in the node's shared window when there is one (a view of `count`
// elements there), else `own`.
template <typename T>
T* gradient_memory(GradientReducer<T>& reducer, std::vector<T>& own, size_t count) {
  own.assign(count, T(-1));
  if (T* shared = reducer.allocate_shared_buffer(count)) return shared;
  return own.data();
}

TEST(ScatteredSum, EachRankHoldsItsPartSummedInNodeOrder) {
  MpiCommunicator comm;
  const std::vector<size_t> tensors{0, 1000, 1003, 4000};
  const size_t count = 10007;
  const auto begins = uneven_parts(comm.size(), count);
  auto reducer = scattering_reducer<float>(comm, tensors, begins);
  ASSERT_TRUE(reducer.scatters());
  std::vector<float> own;
  float* grads = gradient_memory(reducer, own, count);
  const auto nodes = ranks_by_node(comm);
  for (int step = 0; step < 3; ++step) {  // the slots are reused, as in every step
    const auto values = rank_values<float>(comm.rank(), count, step);
    std::copy(values.begin(), values.end(), grads);
    reducer.reduce(grads, count);
    expect_own_part_summed_in_node_order(comm, nodes, grads, begins, step);
  }
  if (comm.ranks_on_node() > 1)  // each node rank sums its whole run at once
    EXPECT_EQ(reducer.buckets().size(), 1u) << "Note [one scattered sum on a node]";
  else
    EXPECT_GT(reducer.buckets().size(), 5u) << "buckets that cut the parts";
}

TEST(ScatteredSum, OverlappedAsBlockingInDouble) {
  MpiCommunicator comm;
  if (comm.ranks_on_node() > 1) GTEST_SKIP() << "the node's sum runs after backward (kShm): nothing overlaps";
  const std::vector<size_t> tensors{0, 2000, 2100, 5000};
  const size_t count = 6001;
  const auto begins = uneven_parts(comm.size(), count);
  auto reducer = scattering_reducer<double>(comm, tensors, begins);
  std::vector<double> grads(count, -1.0);
  test::reduce_as_backward_does(reducer, grads, rank_values<double>(comm.rank(), count, 7), tensors);
  expect_own_part_summed_in_node_order(comm, ranks_by_node(comm), grads.data(), begins, 7);
}

// ZeRO-2's unit sums (GradientReducer::start_unit_sum): three units of one buffer, each summed
// into the parts as it is started, the next started before the last is waited for and the
// first waited for last, so that a slot already waited for serves the next sum; step after
// step, each part holds the node-order sum of its units, bit for bit.
TEST(ScatteredSum, UnitSumsWaitedOutOfStartOrder) {
  MpiCommunicator comm;
  ReduceConfig config;
  config.algorithm = comm.ranks_on_node() > 1 ? "shm" : "mpi";
  GradientReducer<float> reducer(comm, config);
  const size_t count = 3000;
  const auto begins = uneven_parts(comm.size(), count);
  const std::vector<size_t> units{0, 700, 1900, count};
  std::vector<std::vector<size_t>> unit_begins;  // each part's share of each unit, in the unit
  for (size_t u = 0; u + 1 < units.size(); ++u) {
    std::vector<size_t> b;
    for (const size_t at : begins) b.push_back(std::clamp(at, units[u], units[u + 1]) - units[u]);
    unit_begins.push_back(b);
  }
  std::vector<float> own;
  float* grads = gradient_memory(reducer, own, count);
  const auto nodes = ranks_by_node(comm);
  for (int step = 0; step < 3; ++step) {
    const auto values = rank_values<float>(comm.rank(), count, step);
    std::copy(values.begin(), values.end(), grads);
    const int first = reducer.start_unit_sum(grads + units[0], unit_begins[0]);
    const int second = reducer.start_unit_sum(grads + units[1], unit_begins[1]);
    reducer.wait_unit_sum(second, 1, 0);
    const int third = reducer.start_unit_sum(grads + units[2], unit_begins[2]);  // in the second's slot
    reducer.wait_unit_sum(third, 2, 0);
    reducer.wait_unit_sum(first, 0, 0);
    expect_own_part_summed_in_node_order(comm, nodes, grads, begins, step);
  }
}

TEST(ScatteredSum, OnNodesOfSeveralRanksInDouble) {
  MpiCommunicator comm;
  if (comm.ranks_on_node() == 1) GTEST_SKIP() << "one rank per node: EachRankHoldsItsPart covers it";
  const std::vector<size_t> tensors{0, 2000, 2100, 5000};
  const size_t count = 6001;
  const auto begins = uneven_parts(comm.size(), count);
  auto reducer = scattering_reducer<double>(comm, tensors, begins);
  std::vector<double> own;
  double* grads = gradient_memory(reducer, own, count);
  const auto values = rank_values<double>(comm.rank(), count, 7);
  std::copy(values.begin(), values.end(), grads);
  reducer.reduce(grads, count);
  expect_own_part_summed_in_node_order(comm, ranks_by_node(comm), grads, begins, 7);
}

// Note [the allreduce as a scattered sum and a gather]: among nodes of one rank the plain
// (unsharded) kMpi sum is the scattered sum followed by a gather, so every rank ends with
// the whole buffer, each element the sum of every rank's value in rank order, times 1/N:
// the bits of the shm path on one node, whatever MPI's own allreduce would do at N > 2.
template <typename T>
void expect_whole_buffer_summed_in_rank_order(Communicator& comm, const std::vector<T>& result, int step) {
  const T scale = static_cast<T>(1.0 / comm.size());
  for (size_t i = 0; i < result.size(); ++i) {
    T sum = value<T>(0, i, step);
    for (int r = 1; r < comm.size(); ++r) sum += value<T>(r, i, step);
    ASSERT_EQ(result[i], sum * scale) << "element " << i << ", step " << step;
  }
  test::expect_identical_on_every_rank(comm, result);
}

template <typename T>
GradientReducer<T> plain_mpi_reducer(MpiCommunicator& comm, const std::vector<size_t>& tensors) {
  ReduceConfig config;
  config.algorithm = "mpi";
  config.first_bucket_mb = 0.001;  // small buckets: several sums in flight, gathers among them
  config.bucket_cap_mb = 0.004;
  GradientReducer<T> reducer(comm, config);
  reducer.set_tensor_begins(tensors);
  return reducer;
}

TEST(ScatteredSum, AllreduceAmongNodesOfOneAddsInRankOrder) {
  MpiCommunicator comm;
  if (comm.ranks_on_node() > 1) GTEST_SKIP() << "several ranks on a node: MPI_Iallreduce";
  const std::vector<size_t> tensors{0, 1000, 1003, 4000};
  const size_t count = 10007;  // parts of whole cache lines but the last
  auto reducer = plain_mpi_reducer<float>(comm, tensors);
  std::vector<float> grads(count);
  for (int step = 0; step < 3; ++step) {  // overlapped and blocking, on reused slots
    const auto values = rank_values<float>(comm.rank(), count, step);
    if (step == 1) {
      std::copy(values.begin(), values.end(), grads.begin());
      reducer.reduce(grads.data(), count);
    } else {
      test::reduce_as_backward_does(reducer, grads, values, tensors);
    }
    expect_whole_buffer_summed_in_rank_order(comm, grads, step);
    if (comm.size() > 1) {
      EXPECT_EQ(reducer.agreed_finite(), std::optional<bool>(true));
    }
  }
  EXPECT_GT(reducer.buckets().size(), 5u);
}

TEST(ScatteredSum, AllreduceAmongNodesOfOneInDoubleWithFewerElementsThanRanks) {
  MpiCommunicator comm;
  if (comm.ranks_on_node() > 1) GTEST_SKIP() << "several ranks on a node: MPI_Iallreduce";
  for (const size_t count : {size_t{3}, size_t{6001}}) {  // 3: some ranks own nothing
    auto reducer = plain_mpi_reducer<double>(comm, {0});
    std::vector<double> grads = rank_values<double>(comm.rank(), count, 5);
    reducer.reduce(grads.data(), count);
    expect_whole_buffer_summed_in_rank_order(comm, grads, 5);
  }
}

// A NaN that only the last rank holds, in the part rank 0 sums: rank 0's check sees it, and
// every rank learns it from the agreed verdict, though the others checked parts without it.
TEST(ScatteredSum, AllreduceAmongNodesOfOneAgreesOnANaNInOnePart) {
  MpiCommunicator comm;
  if (comm.ranks_on_node() > 1 || comm.size() == 1) GTEST_SKIP() << "needs nodes of one rank, several of them";
  const size_t count = 4096;
  auto reducer = plain_mpi_reducer<float>(comm, {0, 2048});
  std::vector<float> grads = rank_values<float>(comm.rank(), count, 2);
  if (comm.rank() == comm.size() - 1) grads[5] = std::numeric_limits<float>::quiet_NaN();
  reducer.reduce(grads.data(), count);
  EXPECT_TRUE(std::isnan(grads[5]));
  EXPECT_EQ(reducer.agreed_finite(), std::optional<bool>(false));
  grads = rank_values<float>(comm.rank(), count, 3);
  reducer.reduce(grads.data(), count);
  EXPECT_EQ(reducer.agreed_finite(), std::optional<bool>(true));
}

}  // namespace
}  // namespace mpiddp::distributed
