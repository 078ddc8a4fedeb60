#pragma once
// The arithmetic of the reduction backends, MPI-free so it is unit-testable on its own.
#include <cstddef>
#include <cstdint>

#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::distributed {

// data: (count) of `type`; every element multiplied by scale (nothing when scale is 1).
// Returns whether every scaled value is finite, checked block by block while in cache;
// kUnchecked when scale is 1 and nothing was read.
SumsFinite scale_in_place(void* data, size_t count, ElementType type, double scale);

// out[i] = (in[0][i] + in[1][i] + ... + in[n-1][i]) * scale for i in [first, last), summed
// in rank order, so every element has one fixed rounding whoever computes it. out may be
// one of the inputs.
void sum_slice(void* out, const void* const* in, int n, size_t first, size_t last,
               ElementType type, double scale);

// The same sum, written to every one of outs[0..n_outs) (which may be the inputs): each
// output ends with the same bits, computed once. Returns whether every sum is finite (int64:
// always), checked while each block is in cache.
bool sum_slice_into_every(void* const* outs, int n_outs, const void* const* in, int n,
                          size_t first, size_t last, ElementType type, double scale);

// The int64 sums in[0][i] + ... + in[n-1][i] for i in [first, last), converted by
// fixed_point_to_values and written to every one of outs[0..n_outs) as out_type (kFloat32 or
// kFloat64): the inputs are not written.
void sum_fixed_slice_into_every(void* const* outs, int n_outs, ElementType out_type, const void* const* in,
                                int n, size_t first, size_t last, const kernels::FixedPointGroups& groups);

size_t element_bytes(ElementType type);

// Whether every one of the count values of `type` is finite (int64: always).
bool values_finite(const void* data, size_t count, ElementType type);

}  // namespace mpiddp::distributed
