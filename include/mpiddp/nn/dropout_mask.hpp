#pragma once
// The masks of dropout, the layer's and attention's own: a pure function of (run seed, layer,
// epoch, step, global position of the sample, index of the value) through Philox4x32-10
// (core/philox.hpp), never of a generator's state, so that the sample at position q of a
// step is dropped alike at every world size, in any column order, and after a resume
// (Note [the dropout counter] in dropout_mask.cpp).
#include <cstdint>
#include <string>

#include "mpiddp/core/philox.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/nn/context.hpp"

namespace mpiddp::nn {

// A layer's stream for one training pass. Its key names the layer (its config key path)
// in errors.
class DropoutStream {
 public:
  // salt: fnv1a of the layer's key path, so two layers of one model draw different masks.
  // Throws (exit 1, on every rank) when the pass's step or epoch do not fit the counter.
  DropoutStream(const PassContext& context, uint64_t salt, const std::string& key);

  // mask[k] = 0 (dropped, with probability p) or scale, for the values first + k, k < count,
  // of the sample at global position q. The same values whatever `first` a call starts at.
  template <typename T>
  void fill(T* mask, Index first, Index count, Index q, double p, T scale) const;

  // The most values per sample the counter tells apart (2^34).
  static constexpr int64_t kMaxValues = int64_t{1} << 34;

 private:
  PhiloxKey key_;
  uint32_t step_, epoch_;
  const std::string& name_;
};

}  // namespace mpiddp::nn
