#pragma once
// Checks the gradient reducer's MPI tests share (gradient_reducer_test, compressed_sum_test).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "mpiddp/core/hash.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/distributed/gradient_reducer.hpp"

namespace mpiddp::test {

// Every rank holds the same bits in v.
template <typename T>
void expect_identical_on_every_rank(distributed::Communicator& comm, const std::vector<T>& v) {
  const auto hashes = comm.allgather(fnv1a(v.data(), v.size() * sizeof(T)));
  for (size_t r = 1; r < hashes.size(); ++r) EXPECT_EQ(hashes[r], hashes[0]) << "rank " << r;
}

// The overlapped reduction as backward drives it: the tail first, then tensor by tensor
// towards the start (layers: ascending tensor begins); a tensor's values are written into
// grads only just before it is announced ready. grads: (source.size()).
template <typename T>
void reduce_as_backward_does(distributed::GradientReducer<T>& reducer, std::vector<T>& grads,
                             const std::vector<T>& source, const std::vector<size_t>& layers) {
  reducer.begin(grads.data(), grads.size());
  size_t end = grads.size();
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    std::memcpy(grads.data() + *it, source.data() + *it, (end - *it) * sizeof(T));
    reducer.ready_from(*it);
    end = *it;
  }
  reducer.finish();
}

}  // namespace mpiddp::test
