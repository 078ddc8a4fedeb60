// The exact sum across ranks (distributed/exact_sum.hpp): an int64 start_sum has the closed
// form on every path, and the ranks' terms, however they are spread, give the bits that one
// process gets for all of them. Run at np 1, 2, 4 and as two "nodes" of 2 (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "mpiddp/distributed/exact_sum.hpp"
#include "mpiddp/distributed/gradient_reducer.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"

namespace mpiddp::distributed {
namespace {

class ExactSumPaths : public ::testing::TestWithParam<const char*> {};

TEST_P(ExactSumPaths, Int64SumHasTheClosedForm) {
  MpiCommunicator comm;
  const ReduceAlgorithm path = comm.resolve(parse_reduce_algorithm(GetParam()));
  const int64_t n = comm.size(), r = comm.rank();
  // Rank r sends 2^40 + r in each of 5000 elements: the sum is n 2^40 + n(n-1)/2, past 2^53
  // for n >= 16 in a double but exact here at any n.
  std::vector<int64_t> v(5000, (int64_t{1} << 40) + r);
  comm.wait_sum(comm.start_sum(v.data(), v.size(), ElementType::kInt64, 1.0, path, Compression::kNone));
  for (int64_t x : v) ASSERT_EQ(x, n * (int64_t{1} << 40) + n * (n - 1) / 2);
}

TEST_P(ExactSumPaths, SpreadTermsGiveOneProcesssBits) {
  MpiCommunicator comm;
  const ReduceAlgorithm path = comm.resolve(parse_reduce_algorithm(GetParam()));
  // 24 terms of 3000 values in two groups, values of very different sizes so that a float
  // sum would depend on the order. Term q goes to rank q mod N (as chunks do).
  constexpr int kTerms = 24, kWidth = 3000;
  auto value = [](int q, int i) {
    return std::sin(0.37 * q + 0.011 * i) * std::pow(10.0, (q * 7 + i) % 19 - 9);
  };
  std::vector<double> all(kTerms * kWidth), mine;
  for (int q = 0; q < kTerms; ++q)
    for (int i = 0; i < kWidth; ++i) all[q * kWidth + i] = value(q, i);
  for (int q = comm.rank(); q < kTerms; q += comm.size())
    mine.insert(mine.end(), all.begin() + q * kWidth, all.begin() + (q + 1) * kWidth);
  std::vector<double> spread(kWidth), single(kWidth);
  ExactSum sum(comm, {0, 1000}, kWidth, path);
  sum.sum(mine.data(), static_cast<Index>(mine.size() / kWidth), kTerms, 24.0, spread.data());
  LocalCommunicator one;
  ExactSum reference(one, {0, 1000}, kWidth, ReduceAlgorithm::kMpi);
  reference.sum(all.data(), kTerms, kTerms, 24.0, single.data());
  EXPECT_EQ(std::memcmp(spread.data(), single.data(), kWidth * sizeof(double)), 0);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ExactSumPaths, ::testing::Values("mpi", "shm"));

}  // namespace
}  // namespace mpiddp::distributed
