#include "sum_kernels.hpp"

#include <algorithm>

namespace mpiddp::dist {

namespace {

template <typename T>
void scale_typed(T* p, size_t count, T scale) {
  for (size_t i = 0; i < count; ++i) p[i] *= scale;
}

template <typename T>
void sum_typed(T* out, const void* const* in, int n, size_t first, size_t last, T scale) {
  // A block of partial sums on the stack: out may alias an input, so nothing is written
  // to out before every input of the block has been read. 2048 floats stay in L1.
  constexpr size_t kBlock = 2048;
  alignas(64) T acc[kBlock];
  for (size_t begin = first; begin < last; begin += kBlock) {
    const size_t m = std::min(kBlock, last - begin);
    const T* a = static_cast<const T*>(in[0]) + begin;
    for (size_t i = 0; i < m; ++i) acc[i] = a[i];
    for (int r = 1; r < n; ++r) {
      const T* b = static_cast<const T*>(in[r]) + begin;
      for (size_t i = 0; i < m; ++i) acc[i] += b[i];
    }
    T* o = out + begin;
    for (size_t i = 0; i < m; ++i) o[i] = acc[i] * scale;
  }
}

}  // namespace

size_t element_bytes(ElementType type) { return type == ElementType::kFloat32 ? 4 : 8; }

void scale_in_place(void* data, size_t count, ElementType type, double scale) {
  if (scale == 1.0) return;
  if (type == ElementType::kFloat32)
    scale_typed(static_cast<float*>(data), count, static_cast<float>(scale));
  else
    scale_typed(static_cast<double*>(data), count, scale);
}

void sum_slice(void* out, const void* const* in, int n, size_t first, size_t last,
               ElementType type, double scale) {
  if (type == ElementType::kFloat32)
    sum_typed(static_cast<float*>(out), in, n, first, last, static_cast<float>(scale));
  else
    sum_typed(static_cast<double*>(out), in, n, first, last, scale);
}

}  // namespace mpiddp::dist
