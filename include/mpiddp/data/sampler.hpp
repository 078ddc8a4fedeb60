#pragma once
// PyTorch DistributedSampler semantics, as pure functions plus a small stateful wrapper.
//
//   global order: a permutation of [0, n) seeded by (seed, epoch), the same on every rank
//                 (or 0..n-1 without shuffle, or a replayed order from another framework);
//   drop_last false: padded by repeating its head up to a multiple of the world size N;
//   drop_last true:  truncated down to a multiple of N;
//   rank r takes positions r, r+N, r+2N, ...; its batches are consecutive runs of b.
//
// So the k-th batches of all ranks together hold positions [k*b*N, (k+1)*b*N) of the
// global order: exactly the k-th global batch of a single process with B = b*N.
#include <cstdint>
#include <vector>

#include "mpiddp/core/types.hpp"

namespace mpiddp::data {

// The global order of one epoch (epoch counted from 0, as DistributedSampler.set_epoch).
std::vector<Index> epoch_order(Index samples, bool shuffle, uint64_t seed, int64_t epoch);

// This rank's positions of a global order: padded or truncated, then strided.
std::vector<Index> shard_order(const std::vector<Index>& order, int rank, int world_size,
                               bool drop_last);

class DistributedSampler {
 public:
  DistributedSampler(Index samples, int rank, int world_size, bool shuffle, bool drop_last,
                     uint64_t seed);
  // Recomputes this rank's indices for the epoch (0-based), from the sampler's own order
  // or, when given, from a replayed global order of `samples` indices.
  void set_epoch(int64_t epoch, const std::vector<Index>* replay_order = nullptr);
  const std::vector<Index>& indices() const { return indices_; }
  // Samples per rank per epoch: ceil(n / N) with padding, floor(n / N) with drop_last.
  Index per_rank() const;
  // Steps per epoch with b samples per rank and step: ceil(per_rank / b), the last step
  // holding the rest.
  Index steps_per_epoch(Index batch_per_rank) const {
    return (per_rank() + batch_per_rank - 1) / batch_per_rank;
  }

 private:
  Index samples_;
  int rank_, world_size_;
  bool shuffle_, drop_last_;
  uint64_t seed_;
  std::vector<Index> indices_;
};

}  // namespace mpiddp::data
