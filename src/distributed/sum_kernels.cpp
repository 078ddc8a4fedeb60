#include "sum_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "mpiddp/core/finite.hpp"
#include "mpiddp/kernels/isa.hpp"
#include "../kernels/targets.hpp"

namespace mpiddp::distributed {

namespace {

// Every loop here is elementwise (a sum in rank order, a product by the scale), so each
// level's variant (Note [kernels per instruction set] in src/kernels/isa.cpp) gives the same
// bits: the *_body functions are inlined into a variant per level, which vectorises them at its
// width.

// acc[i] = in[0][begin + i] + ... + in[n-1][begin + i] for i < m, in rank order.
template <typename T>
MPIDDP_ALWAYS_INLINE void sum_block(T* acc, const void* const* in, int n, size_t begin, size_t m) {
  const T* a = static_cast<const T*>(in[0]) + begin;
  for (size_t i = 0; i < m; ++i) acc[i] = a[i];
  for (int r = 1; r < n; ++r) {
    const T* b = static_cast<const T*>(in[r]) + begin;
    for (size_t i = 0; i < m; ++i) acc[i] += b[i];
  }
}

template <typename T>
bool finite_block(const T* values, size_t count) {
  if constexpr (std::is_integral_v<T>) {
    return true;
  } else {
    // An integer maximum over the bits, which vectorises; a float sum would run serially.
    return std::isfinite(largest_magnitude(values, count));
  }
}

// p *= scale, and whether every result is finite, checked a cache-sized block at a time.
template <typename T>
MPIDDP_ALWAYS_INLINE bool scale_body(T* p, size_t count, T scale) {
  constexpr size_t kBlock = 2048;
  bool finite = true;
  for (size_t begin = 0; begin < count; begin += kBlock) {
    const size_t m = std::min(kBlock, count - begin);
    for (size_t i = begin; i < begin + m; ++i) p[i] *= scale;
    finite = finite_block(p + begin, m) && finite;
  }
  return finite;
}

template <typename T>
MPIDDP_ALWAYS_INLINE bool sum_body(void* const* outs, int n_outs, const void* const* in, int n, size_t first,
                                   size_t last, T scale) {
  // A block of partial sums on the stack: an output may alias an input, so nothing is
  // written before every input of the block has been read. 2048 floats stay in L1.
  constexpr size_t kBlock = 2048;
  alignas(64) T acc[kBlock];
  bool finite = true;
  for (size_t begin = first; begin < last; begin += kBlock) {
    const size_t m = std::min(kBlock, last - begin);
    sum_block(acc, in, n, begin, m);
    for (size_t i = 0; i < m; ++i) acc[i] *= scale;
    finite = finite_block(acc, m) && finite;
    for (int k = 0; k < n_outs; ++k) std::copy_n(acc, m, static_cast<T*>(outs[k]) + begin);
  }
  return finite;
}

template <typename T>
MPIDDP_ALWAYS_INLINE void sum_fixed_body(void* const* outs, int n_outs, const void* const* in, int n, size_t first,
                                         size_t last, const kernels::FixedPointGroups& groups) {
  // Blocks that stay in L1: the int64 sums, then their values, copied to every output.
  constexpr size_t kBlock = 1024;
  alignas(64) int64_t acc[kBlock];
  alignas(64) T values[kBlock];
  for (size_t begin = first; begin < last; begin += kBlock) {
    const size_t m = std::min(kBlock, last - begin);
    sum_block(acc, in, n, begin, m);
    kernels::fixed_point_to_values(acc, begin, m, groups, values);
    for (int k = 0; k < n_outs; ++k) std::copy_n(values, m, static_cast<T*>(outs[k]) + begin);
  }
}

// Each body's variants, and the function that calls the one the dispatch picks.
#define MPIDDP_SUM_VARIANTS(name, body, Return, Params, Args)                                     \
  MPIDDP_VARIANTS_OF(name, body, Return, Params, Args)                                           \
  template <typename T>                                                                          \
  Return name Params {                                                                           \
    using Kernel = Return(*) Params;                                                             \
    static const kernels::Dispatched<Kernel> variants(                                           \
        {name##_portable<T>, name##_avx2<T>, name##_avx512<T>, nullptr, nullptr});               \
    return variants() Args;                                                                      \
  }

MPIDDP_SUM_VARIANTS(scale_typed, scale_body, bool, (T * p, size_t count, T scale), (p, count, scale))
MPIDDP_SUM_VARIANTS(sum_typed, sum_body, bool,
                    (void* const* outs, int n_outs, const void* const* in, int n, size_t first, size_t last,
                     T scale),
                    (outs, n_outs, in, n, first, last, scale))
MPIDDP_SUM_VARIANTS(sum_fixed_typed, sum_fixed_body, void,
                    (void* const* outs, int n_outs, const void* const* in, int n, size_t first, size_t last,
                     const kernels::FixedPointGroups& groups),
                    (outs, n_outs, in, n, first, last, groups))
#undef MPIDDP_SUM_VARIANTS

}  // namespace

void sum_fixed_slice_into_every(void* const* outs, int n_outs, ElementType out_type, const void* const* in,
                                int n, size_t first, size_t last, const kernels::FixedPointGroups& groups) {
  if (out_type == ElementType::kFloat32)
    sum_fixed_typed<float>(outs, n_outs, in, n, first, last, groups);
  else
    sum_fixed_typed<double>(outs, n_outs, in, n, first, last, groups);
}

size_t element_bytes(ElementType type) { return type == ElementType::kFloat32 ? 4 : 8; }

bool values_finite(const void* data, size_t count, ElementType type) {
  if (type == ElementType::kFloat32) return finite_block(static_cast<const float*>(data), count);
  if (type == ElementType::kFloat64) return finite_block(static_cast<const double*>(data), count);
  return true;
}

// kInt64 sums are never scaled (ElementType): scale_in_place leaves them alone at scale 1.

SumsFinite scale_in_place(void* data, size_t count, ElementType type, double scale) {
  if (scale == 1.0) return SumsFinite::kUnchecked;
  bool finite = true;
  if (type == ElementType::kFloat32)
    finite = scale_typed(static_cast<float*>(data), count, static_cast<float>(scale));
  else if (type == ElementType::kInt64)
    finite = scale_typed(static_cast<int64_t*>(data), count, static_cast<int64_t>(scale));
  else
    finite = scale_typed(static_cast<double*>(data), count, scale);
  return finite ? SumsFinite::kFinite : SumsFinite::kNotFinite;
}

void sum_slice(void* out, const void* const* in, int n, size_t first, size_t last,
               ElementType type, double scale) {
  sum_slice_into_every(&out, 1, in, n, first, last, type, scale);
}

bool sum_slice_into_every(void* const* outs, int n_outs, const void* const* in, int n,
                          size_t first, size_t last, ElementType type, double scale) {
  if (type == ElementType::kFloat32) return sum_typed(outs, n_outs, in, n, first, last, static_cast<float>(scale));
  if (type == ElementType::kInt64) return sum_typed(outs, n_outs, in, n, first, last, static_cast<int64_t>(scale));
  return sum_typed(outs, n_outs, in, n, first, last, scale);
}

}  // namespace mpiddp::distributed
