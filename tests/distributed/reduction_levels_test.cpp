#include "mpiddp/distributed/reduction_levels.hpp"

#include <gtest/gtest.h>

namespace mpiddp::distributed {
namespace {

TEST(ReductionLevels, OneNodeOfTwoRanksSumsInSharedMemoryOnly) {
  const auto levels = reduction_levels(ReduceAlgorithm::kShm, {"a", "a"}, 2);
  EXPECT_EQ(levels.nodes, 1);
  EXPECT_EQ(levels.ranks_per_node, 2);
  EXPECT_EQ(levels.within_node, "shm");
  EXPECT_EQ(levels.between_nodes, "none");
}

TEST(ReductionLevels, TwoNodesOfTwoRanksUseSharedMemoryThenMpi) {
  const auto levels = reduction_levels(ReduceAlgorithm::kShm, {"n1", "n1", "n2", "n2"}, 2);
  EXPECT_EQ(levels.nodes, 2);
  EXPECT_EQ(levels.within_node, "shm");
  EXPECT_EQ(levels.between_nodes, "mpi");
  // reduce.algorithm = "mpi": the library's allreduce at both levels.
  const auto mpi = reduction_levels(ReduceAlgorithm::kMpi, {"n1", "n1", "n2", "n2"}, 2);
  EXPECT_EQ(mpi.within_node, "mpi");
  EXPECT_EQ(mpi.between_nodes, "mpi");
}

TEST(ReductionLevels, OneRankPerNodeHasNothingInsideANode) {
  const auto levels = reduction_levels(ReduceAlgorithm::kMpi, {"n1", "n2"}, 1);
  EXPECT_EQ(levels.nodes, 2);
  EXPECT_EQ(levels.within_node, "none");
  EXPECT_EQ(levels.between_nodes, "mpi");
  // One process: nothing at either level.
  const auto alone = reduction_levels(ReduceAlgorithm::kMpi, {"a"}, 1);
  EXPECT_EQ(alone.within_node, "none");
  EXPECT_EQ(alone.between_nodes, "none");
}

TEST(ReductionLevels, SharedMemoryDomainsSmallerThanTheHostCountAsNodes) {
  // MPIDDP_TEST_RANKS_PER_NODE=2 on one host with 4 ranks: two "nodes" of two.
  const auto levels = reduction_levels(ReduceAlgorithm::kShm, {"a", "a", "a", "a"}, 2);
  EXPECT_EQ(levels.nodes, 1);
  EXPECT_EQ(levels.between_nodes, "mpi");
}

}  // namespace
}  // namespace mpiddp::distributed
