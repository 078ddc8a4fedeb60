#include "mpiddp/data/sampler.hpp"

#include <numeric>
#include <utility>

#include "mpiddp/core/rng.hpp"

namespace mpiddp::data {

std::vector<Index> epoch_order(Index samples, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<Index> order(samples);
  std::iota(order.begin(), order.end(), Index{0});
  if (shuffle) {
    Rng rng(mix_seed(mix_seed(seed, 0x5A5A), static_cast<uint64_t>(epoch)));
    for (Index i = samples - 1; i > 0; --i)  // Fisher-Yates
      std::swap(order[i], order[static_cast<Index>(rng.below(static_cast<uint64_t>(i) + 1))]);
  }
  return order;
}

std::vector<Index> shard_order(const std::vector<Index>& order, int rank, int world_size,
                               bool drop_last) {
  const Index n = static_cast<Index>(order.size());
  const Index per_rank = drop_last ? n / world_size : (n + world_size - 1) / world_size;
  std::vector<Index> mine;
  mine.reserve(per_rank);
  for (Index k = 0; k < per_rank; ++k) {
    // Positions past the end wrap to the head of the order: DistributedSampler's padding.
    const Index position = k * world_size + rank;
    mine.push_back(order[position % n]);
  }
  return mine;
}

DistributedSampler::DistributedSampler(Index samples, int rank, int world_size, bool shuffle,
                                       bool drop_last, uint64_t seed)
    : samples_(samples), rank_(rank), world_size_(world_size), shuffle_(shuffle),
      drop_last_(drop_last), seed_(seed) {}

void DistributedSampler::set_epoch(int64_t epoch, const std::vector<Index>* replay_order) {
  if (replay_order) {
    indices_ = shard_order(*replay_order, rank_, world_size_, drop_last_);
  } else {
    indices_ = shard_order(epoch_order(samples_, shuffle_, seed_, epoch), rank_, world_size_,
                           drop_last_);
  }
}

Index DistributedSampler::per_rank() const {
  return drop_last_ ? samples_ / world_size_ : (samples_ + world_size_ - 1) / world_size_;
}

}  // namespace mpiddp::data
