#include "mpiddp/nn/dropout_mask.hpp"

#include <algorithm>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/rng.hpp"

namespace mpiddp::nn {

// Note [the dropout counter]
// Value j of the sample at global position q, in step `step` of epoch `epoch`, is dropped
// when u < p, where u = w * 2^-32 and w is lane j % 4 of
//   philox4x32_10(counter = (j / 4, q, step, epoch), key = mix_seed(seed, salt))
// (the key's low 32 bits first), salt = fnv1a of the layer's key path, so two dropout
// layers of one model draw different masks. Every word must fit in 32 bits:
//   j / 4  < 2^32  since a sample has at most 2^34 values (checked when the layer is built);
//   q      < 2^32  a position inside one step's global batch, far below that in practice;
//   step   < 2^32  the global step, counted from 1: 4 billion steps;
//   epoch  < 2^32.
// The last three are checked in every training pass, so a wrap can never repeat a mask.
// Attention numbers its values per sample head by head, query by query, key by key:
// j = (h T + i) T + k for the probability of key k at query i in head h.

namespace {

constexpr int64_t kWord = int64_t{1} << 32;

}  // namespace

DropoutStream::DropoutStream(const PassContext& context, uint64_t salt, const std::string& key) : name_(key) {
  if (context.step < 0 || context.step >= kWord || context.epoch < 0 || context.epoch >= kWord)
    throw Error(kExitFailure,
                key + ": dropout's counter needs step and epoch in [0, 2^32), got step " +
                    std::to_string(context.step) + ", epoch " + std::to_string(context.epoch),
                Scope::kEveryRank);
  const uint64_t seed = mix_seed(context.seed, salt);
  key_ = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  step_ = static_cast<uint32_t>(context.step);
  epoch_ = static_cast<uint32_t>(context.epoch);
}

template <typename T>
void DropoutStream::fill(T* mask, Index first, Index count, Index q, double p, T scale) const {
  if (q < 0 || q >= kWord)
    throw Error(kExitFailure, name_ + ": dropout's counter needs sample positions in [0, 2^32), got " +
                                  std::to_string(q));
  const Index end = first + count;
  for (Index block = first / 4; block * 4 < end; ++block) {
    const PhiloxCounter words =
        philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(q), step_, epoch_}, key_);
    for (Index j = std::max(first, block * 4); j < std::min(end, block * 4 + 4); ++j) {
      const double u = static_cast<double>(words[static_cast<size_t>(j % 4)]) * 0x1p-32;
      mask[j - first] = u < p ? T(0) : scale;
    }
  }
}

template void DropoutStream::fill<float>(float*, Index, Index, Index, double, float) const;
template void DropoutStream::fill<double>(double*, Index, Index, Index, double, double) const;

}  // namespace mpiddp::nn
