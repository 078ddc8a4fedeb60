#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/gradient_reducer.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "mpiddp/train/replica_check.hpp"

namespace mpiddp::distributed {
namespace {

TEST(MpiCommunicator, AllreduceSumHasTheClosedForm) {
  MpiCommunicator comm;
  const int n = comm.size();
  // Every rank contributes its rank: the sum is 0 + 1 + ... + (n-1) = n(n-1)/2.
  std::vector<float> f(1000, static_cast<float>(comm.rank()));
  std::vector<double> d(7, comm.rank() + 0.5);
  comm.allreduce_sum(f.data(), f.size());
  comm.allreduce_sum(d.data(), d.size());
  for (float v : f) EXPECT_EQ(v, n * (n - 1) / 2.0f);
  for (double v : d) EXPECT_EQ(v, n * (n - 1) / 2.0 + 0.5 * n);
}

TEST(MpiCommunicator, MaxBroadcastAllgather) {
  MpiCommunicator comm;
  double m = comm.rank() * 1.5;
  comm.allreduce_max(&m, 1);
  EXPECT_EQ(m, (comm.size() - 1) * 1.5);
  int value = comm.rank() == 0 ? 1234 : -1;
  comm.broadcast(&value, sizeof value, 0);
  EXPECT_EQ(value, 1234);
  const auto all = comm.allgather(static_cast<uint64_t>(comm.rank() * 10));
  ASSERT_EQ(all.size(), static_cast<size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(all[r], static_cast<uint64_t>(r * 10));
  EXPECT_NE(comm.library_version(), "");
}

// A count above an MPI int used to be cast and wrap (2^31 became -2^31: some other count);
// now every rank refuses it alike, before MPI sees it (the buffer is never touched).
TEST(MpiCommunicator, CountsAboveAnMpiIntAreRefusedOnEveryRank) {
  MpiCommunicator comm;
  float f = 1.0f;
  double d = 1.0;
  const size_t too_many = size_t{1} << 31;
  for (auto call : {+[](MpiCommunicator& c, float* x, double*, size_t n) { c.allreduce_sum(x, n); },
                    +[](MpiCommunicator& c, float*, double* y, size_t n) { c.allreduce_sum(y, n); },
                    +[](MpiCommunicator& c, float*, double* y, size_t n) { c.allreduce_max(y, n); }}) {
    try {
      call(comm, &f, &d, too_many);
      ADD_FAILURE() << "no error for 2^31 elements";
    } catch (const Error& e) {
      EXPECT_TRUE(e.on_every_rank());
      EXPECT_NE(std::string(e.what()).find("2147483648 elements, more than an MPI count holds"),
                std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(f, 1.0f);
  comm.allreduce_sum(&d, 1);  // the communicator still works, in step on every rank
  EXPECT_EQ(d, comm.size());
}

TEST(MpiCommunicator, AllgatherStringKeepsEachRanksBytesInRankOrder) {
  MpiCommunicator comm;
  // Rank r sends r copies of the letter 'a' + r: lengths differ, rank 0's is empty, and a
  // NUL byte in the middle must survive (these are bytes, not C strings).
  std::string mine(static_cast<size_t>(comm.rank()), static_cast<char>('a' + comm.rank()));
  if (comm.rank() == 1) mine = std::string("b\0b", 3);
  const auto all = comm.allgather_string(mine);
  ASSERT_EQ(all.size(), static_cast<size_t>(comm.size()));
  EXPECT_EQ(all[0], "");
  if (comm.size() > 1) {
    EXPECT_EQ(all[1], std::string("b\0b", 3));
  }
  for (int r = 2; r < comm.size(); ++r)
    EXPECT_EQ(all[r], std::string(static_cast<size_t>(r), static_cast<char>('a' + r))) << r;
  // Host names: every rank sees the same list, and its own name at its own index.
  const auto hosts = comm.allgather_string(comm.host_name());
  EXPECT_EQ(hosts[comm.rank()], comm.host_name());
}

// Node rank r fills part r with r + 1 and the other parts with a mark that must not survive;
// after allgather_node_parts every part r holds r + 1 on every rank. Parts of 3 lines and a
// last, shorter one, at byte offsets.
void expect_node_parts_exchanged(MpiCommunicator& comm, unsigned char* data) {
  const int parts = comm.ranks_on_node();
  std::vector<size_t> begins;
  for (int r = 0; r <= parts; ++r) begins.push_back(static_cast<size_t>(r) * 192 - (r == parts ? 40 : 0));
  if (parts == 1) begins = {0, 152};
  for (int round = 0; round < 2; ++round) {  // reused, as in every step
    for (int r = 0; r < parts; ++r)
      for (size_t i = begins[r]; i < begins[r + 1]; ++i)
        data[i] = static_cast<unsigned char>(r == comm.node_rank() ? r + 1 + round : 0xEE);
    // In the trainer the gradient sum's barriers come between one exchange and the next
    // stores; here an allreduce does, so no rank stores into a buffer still being filled.
    double fence = 0.0;
    comm.allreduce_sum(&fence, 1);
    comm.allgather_node_parts(data, begins);
    int wrong = 0;
    for (int r = 0; r < parts; ++r)
      for (size_t i = begins[r]; i < begins[r + 1]; ++i)
        if (data[i] != r + 1 + round) ++wrong;
    EXPECT_EQ(wrong, 0) << "round " << round;
    comm.allreduce_sum(&fence, 1);  // every rank has checked before the next fill
  }
}

TEST(MpiCommunicator, NodePartsReachEveryRankInPrivateMemory) {
  MpiCommunicator comm;  // by MPI_Allgatherv
  std::vector<unsigned char> data(static_cast<size_t>(comm.ranks_on_node()) * 192);
  expect_node_parts_exchanged(comm, data.data());
}

TEST(MpiCommunicator, NodeCopyIsOneBufferThatEveryRankOfTheNodeReads) {
  // Note [parameters once per node]: the copy holds node rank 0's bytes; each rank writes its
  // own part and allgather_node_parts ends the writes; broadcast() into it makes every
  // node's copy world rank 0's.
  MpiCommunicator comm;
  const int parts = comm.ranks_on_node();
  std::vector<size_t> begins;
  for (int r = 0; r <= parts; ++r) begins.push_back(static_cast<size_t>(r) * 192 - (r == parts ? 40 : 0));
  std::vector<unsigned char> mine(begins.back(), static_cast<unsigned char>(10 + comm.node_rank()));
  auto* copy = static_cast<unsigned char*>(comm.share_on_node(mine.data(), mine.size()));
  if (!copy) GTEST_SKIP() << "one rank on the node: nothing to share";
  EXPECT_NE(copy, mine.data());
  EXPECT_EQ(std::count(copy, copy + mine.size(), 10), static_cast<long>(mine.size()));
  double fence = 0.0;
  for (int round = 0; round < 2; ++round) {  // reused, as in every step
    comm.allreduce_sum(&fence, 1);            // every rank has read the previous round
    const size_t first = begins[static_cast<size_t>(comm.node_rank())];
    const size_t last = begins[static_cast<size_t>(comm.node_rank()) + 1];
    std::fill(copy + first, copy + last, static_cast<unsigned char>(comm.node_rank() + 1 + round));
    comm.allgather_node_parts(copy, begins);
    int wrong = 0;
    for (int r = 0; r < parts; ++r)
      for (size_t i = begins[r]; i < begins[r + 1]; ++i)
        if (copy[i] != r + 1 + round) ++wrong;
    EXPECT_EQ(wrong, 0) << "round " << round;
  }
  // Each node's rank 0 writes its world rank; broadcast() leaves world rank 0's everywhere.
  comm.allreduce_sum(&fence, 1);
  if (comm.node_rank() == 0) std::fill(copy, copy + mine.size(), static_cast<unsigned char>(100 + comm.rank()));
  comm.broadcast(copy, mine.size(), 0);
  EXPECT_EQ(std::count(copy, copy + mine.size(), 100), static_cast<long>(mine.size()));
}

TEST(GradientReducer, AveragesOverRanks) {
  MpiCommunicator comm;
  // Rank r holds gradient (r + 1) * [1, 2, 3]: the mean is (n + 1)/2 * [1, 2, 3].
  std::vector<double> g = {1.0 * (comm.rank() + 1), 2.0 * (comm.rank() + 1), 3.0 * (comm.rank() + 1)};
  GradientReducer<double>(comm).reduce(g.data(), g.size());
  const double mean = (comm.size() + 1) / 2.0;
  EXPECT_DOUBLE_EQ(g[0], mean);
  EXPECT_DOUBLE_EQ(g[1], 2 * mean);
  EXPECT_DOUBLE_EQ(g[2], 3 * mean);
}

TEST(ReplicaCheck, FindsTheDifferingRankAndTheDifference) {
  MpiCommunicator comm;
  std::vector<float> params(100, 0.25f), scratch(100);
  auto same = train::check_replicas<float>(comm, params.data(), 100, scratch.data(), 100);
  EXPECT_TRUE(same.identical);
  EXPECT_EQ(same.max_diff, 0.0);
  if (comm.size() == 1) return;
  if (comm.rank() == comm.size() - 1) params[42] += 0.5f;
  auto differ = train::check_replicas<float>(comm, params.data(), 100, scratch.data(), 100);
  EXPECT_FALSE(differ.identical);
  EXPECT_EQ(differ.first_differing_rank, comm.size() - 1);
  EXPECT_DOUBLE_EQ(differ.max_diff, 0.5);
}

TEST(ReplicaCheck, SmallScratchComparesPieceByPiece) {
  // 100 parameters through a scratch of 7: 15 pieces, the last of 2 (98, 99).
  MpiCommunicator comm;
  std::vector<float> params(100, 0.25f), scratch(7);
  EXPECT_TRUE(train::check_replicas<float>(comm, params.data(), 100, scratch.data(), 7).identical);
  if (comm.size() == 1) return;
  if (comm.rank() == comm.size() - 1) params[99] -= 0.125f;  // in the last, short piece
  auto differ = train::check_replicas<float>(comm, params.data(), 100, scratch.data(), 7);
  EXPECT_FALSE(differ.identical);
  EXPECT_EQ(differ.first_differing_rank, comm.size() - 1);
  EXPECT_DOUBLE_EQ(differ.max_diff, 0.125);
}

TEST(ReplicaCheck, ReplicasIdenticalDownToAnInfinityAndANaNAreIdentical) {
  // inf - inf and NaN - NaN are NaN: a check by subtraction called these replicas different
  // although every bit agrees.
  MpiCommunicator comm;
  std::vector<double> params(10, 0.5), scratch(3);
  params[1] = std::numeric_limits<double>::infinity();
  params[4] = -std::numeric_limits<double>::infinity();
  params[9] = std::numeric_limits<double>::quiet_NaN();  // last: nothing after it can hide it
  const auto report = train::check_replicas<double>(comm, params.data(), 10, scratch.data(), 3);
  EXPECT_TRUE(report.identical);
  EXPECT_EQ(report.max_diff, 0.0);
  EXPECT_TRUE(report.differing_ranks.empty());
}

TEST(ReplicaCheck, ANaNOnOneSideIsReportedAsNaNWhereverItIs) {
  // The NaN comes first, a finite difference of 0.25 later in another piece: before, the
  // later difference replaced the NaN, and a rank without the NaN could not learn of it.
  MpiCommunicator comm;
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  for (const int nan_rank : {0, comm.size() - 1}) {
    std::vector<float> params(20, 1.0f), scratch(4);
    if (comm.rank() == nan_rank) params[2] = std::numeric_limits<float>::quiet_NaN();
    if (comm.rank() == comm.size() - 1) params[17] += 0.25f;
    const auto report = train::check_replicas<float>(comm, params.data(), 20, scratch.data(), 4);
    EXPECT_FALSE(report.identical) << "NaN on rank " << nan_rank;
    EXPECT_TRUE(std::isnan(report.max_diff)) << "NaN on rank " << nan_rank << ": " << report.max_diff;
  }
  // An infinity against a finite value is an infinite difference, not a NaN.
  std::vector<float> params(20, 1.0f), scratch(4);
  if (comm.rank() == comm.size() - 1) params[5] = std::numeric_limits<float>::infinity();
  const auto report = train::check_replicas<float>(comm, params.data(), 20, scratch.data(), 4);
  EXPECT_FALSE(report.identical);
  EXPECT_EQ(report.max_diff, std::numeric_limits<double>::infinity());
}

TEST(ReplicaCheck, RejectsAScratchOfNoValues) {
  // A scratch of no values can hold no piece. Rejected before any collective, so every
  // rank throws alike and none is left waiting.
  MpiCommunicator comm;
  std::vector<float> params(100, 0.25f);
  EXPECT_THROW(train::check_replicas<float>(comm, params.data(), 100, nullptr, 0),
               std::invalid_argument);
}

}  // namespace
}  // namespace mpiddp::distributed
