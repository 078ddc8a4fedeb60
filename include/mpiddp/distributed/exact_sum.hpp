#pragma once
// An exact, order-independent sum over ranks: the deterministic mode's reduction
// (docs/design.md, Note [deterministic mode]).
//
// Note [the fixed-point sum]
// Floating-point addition is not associative, so the sum of the same numbers depends on the
// order and grouping in which they are added: on the world size, the allreduce algorithm and
// the message sizes. Integer addition is associative. So every value v of a group (a tensor,
// the loss) is rounded once to an integer on a grid shared by every rank,
//   i = llrint(v * 2^s),   s = 62 - h - e,
// where 2^e > M = max |v| over the group's values on every rank (one small max-reduction
// first), and 2^h >= the number of terms. Then |i| <= 2^(62-h), a sum of at most 2^h terms
// stays within 2^62 < 2^63: no overflow, whatever the order. The int64 sums are exact, so
// any algorithm, any path and any order give the same integers, and the one conversion back,
// sum * 2^-s, gives the same bits everywhere. What is lost is what falls below the grid:
// each value keeps the bits above M * 2^-(62-h), i.e. 62 - h bits for the largest (50 for
// h = 12, 4096 terms); a float32 value keeps all of its 24 bits when it is within 2^(38-h)
// of the group's largest. That rounding happens per value, before any addition, so it is
// the same at every world size.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mpiddp/core/types.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/kernels/fixed_point.hpp"

namespace mpiddp::distributed {

class ExactSum {
 public:
  // Each term is `width` values, cut into groups at group_begins (ascending, the first 0):
  // each group has its own grid, so a small tensor keeps its digits next to a large one.
  ExactSum(Communicator& comm, std::vector<size_t> group_begins, size_t width,
           ReduceAlgorithm algorithm);

  // terms: (local_terms, width), this rank's terms one after the other; out: (width).
  // out = (the sum of every rank's terms) / divisor, the same bits on every rank at every
  // world size. Collective: every rank calls it with the same width and max_terms (at
  // least the number of terms over all ranks); local_terms may differ. A group holding a
  // NaN or an infinity on any rank comes out as NaN on every rank.
  // V: float or double (a float32 run keeps its chunk gradients in float: half the memory
  // and the memory traffic, and nothing is lost, float converts to double exactly).
  template <typename V>
  void sum(const V* terms, Index local_terms, int64_t max_terms, double divisor, double* out);

  // Whether every value of this rank's terms in the last sum was finite (what the sum's
  // largest magnitudes show before they are reduced): the rank's own verdict, as the
  // default mode's check of its local gradients gives, without a pass of its own.
  bool local_terms_finite() const { return local_terms_finite_; }

  // Bytes this rank sends per sum (before the MPI algorithm's own factor): the max-reduction
  // and the int64 sum.
  size_t message_bytes() const { return groups_.size() * sizeof(double) + width_ * sizeof(int64_t); }

 private:
  Communicator& comm_;
  std::vector<size_t> groups_;  // (G + 1) group boundaries, the last = width
  size_t width_;
  ReduceAlgorithm algorithm_;
  std::vector<double> max_;      // (G)
  std::vector<int> shift_;       // (G) each group's grid; 0 for an all-zero or non-finite group
  std::vector<char> finite_;     // (G) whether the group's largest magnitude was finite
  std::vector<int64_t> fixed_;   // (width)
  bool local_terms_finite_ = true;
};

}  // namespace mpiddp::distributed
