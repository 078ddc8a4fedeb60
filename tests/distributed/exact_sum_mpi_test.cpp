// The exact sum across ranks (distributed/exact_sum.hpp): an int64 start_sum has the closed
// form on every path, and the ranks' terms, however they are spread, give the bits that one
// process gets for all of them. Run at np 1, 2, 4 and as two "nodes" of 2 (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "mpiddp/distributed/exact_sum.hpp"
#include "mpiddp/kernels/fixed_point.hpp"
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

// Communicator::sum_fixed_point: the ranks' int64 terms summed and converted group by group
// give the values one process converts from the totals, bit for bit, in float and in double;
// on the shm path with both buffers in shared windows it sums and converts in one pass
// (Note [the fixed-point sum converted in place]), which the odd size cuts inside groups.
TEST_P(ExactSumPaths, FixedPointSumConvertsAsOneProcessDoes) {
  MpiCommunicator comm;
  const ReduceAlgorithm path = comm.resolve(parse_reduce_algorithm(GetParam()));
  constexpr size_t kCount = 10007;
  const std::vector<size_t> begins = {0, 3001, 3001, 7000, kCount};  // an empty group
  const std::vector<int> shifts = {30, 20, 25, 40};
  const std::vector<char> finite = {1, 1, 0, 1};  // group 2 comes out NaN
  const kernels::FixedPointGroups groups{begins.data(), 4, shifts.data(), finite.data(), 24.0};
  auto term = [](size_t i, int64_t r) {
    return static_cast<int64_t>((i * 2654435761u + static_cast<uint64_t>(r) * 97) % (uint64_t{1} << 41)) -
           (int64_t{1} << 40);
  };
  std::vector<int64_t> totals(kCount, 0);
  for (size_t i = 0; i < kCount; ++i)
    for (int64_t r = 0; r < comm.size(); ++r) totals[i] += term(i, r);
  for (const ElementType type : {ElementType::kFloat32, ElementType::kFloat64}) {
    const size_t bytes = type == ElementType::kFloat32 ? sizeof(float) : sizeof(double);
    auto* shared_sums = static_cast<int64_t*>(comm.allocate_shared_buffer(kCount * sizeof(int64_t)));
    void* shared_out = comm.allocate_shared_buffer(kCount * bytes);
    std::vector<int64_t> own_sums(shared_sums ? 0 : kCount);
    std::vector<double> own_out(shared_out ? 0 : kCount);  // room for either type
    int64_t* sums = shared_sums ? shared_sums : own_sums.data();
    void* out = shared_out ? shared_out : own_out.data();
    for (size_t i = 0; i < kCount; ++i) sums[i] = term(i, comm.rank());
    comm.sum_fixed_point(sums, kCount, groups, out, type, path);
    // The definition: total 2^-shift / 24, rounded once to the type; NaN in group 2.
    std::vector<double> expected(kCount);  // room for either type
    for (size_t g = 0; g < 4; ++g)
      for (size_t i = begins[g]; i < begins[g + 1]; ++i) {
        const double value = finite[g] ? static_cast<double>(totals[i]) * std::ldexp(1.0, -shifts[g]) / 24.0
                                       : std::numeric_limits<double>::quiet_NaN();
        if (type == ElementType::kFloat32)
          reinterpret_cast<float*>(expected.data())[i] = static_cast<float>(value);
        else
          expected[i] = value;
      }
    EXPECT_EQ(std::memcmp(out, expected.data(), kCount * bytes), 0) << (bytes == 4 ? "float" : "double");
    const double first = type == ElementType::kFloat32 ? static_cast<double>(static_cast<float*>(out)[0])
                                                       : static_cast<double*>(out)[0];
    EXPECT_NE(first, 0.0);
    const double in_nan_group = type == ElementType::kFloat32 ? static_cast<double>(static_cast<float*>(out)[5000])
                                                              : static_cast<double*>(out)[5000];
    EXPECT_TRUE(std::isnan(in_nan_group));
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ExactSumPaths, ::testing::Values("mpi", "shm"));

}  // namespace
}  // namespace mpiddp::distributed
