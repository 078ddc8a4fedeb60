#pragma once
// How scratch memory is cut into pieces: every piece starts on 64 bytes, so that each stays
// aligned for vector loads and no two pieces share a cache line. The layers lay out their
// scratch this way (nn/layer.hpp), and the kernels their workspaces (kernels/attention_head.hpp).
#include <cstddef>

#include "mpiddp/core/types.hpp"

namespace mpiddp {

// Round a scratch size up to the 64 bytes every piece starts on.
constexpr size_t align_scratch(size_t bytes) { return (bytes + 63) / 64 * 64; }
// The scratch bytes of `count` values of T, so that the next piece starts aligned again.
template <typename T>
constexpr size_t scratch_values_bytes(Index count) {
  return align_scratch(static_cast<size_t>(count) * sizeof(T));
}
// Takes `count` values of T from the front of scratch, which moves past them to the next
// aligned piece: the way every piece is laid out that scratch_values_bytes counted.
template <typename T>
T* take_scratch_values(std::byte*& scratch, Index count) {
  T* values = reinterpret_cast<T*>(scratch);
  scratch += scratch_values_bytes<T>(count);
  return values;
}

}  // namespace mpiddp
