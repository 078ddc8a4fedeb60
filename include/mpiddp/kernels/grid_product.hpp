#pragma once
// A linear layer's weight gradient straight onto the deterministic mode's integer grid, chunk
// by chunk, in one kernel of our own (Note [the grid product] in src/kernels/grid_product.cpp).
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "mpiddp/core/types.hpp"

namespace mpiddp::kernels {

// Whether this build has the kernel: it needs AVX-512 F and DQ (a native build on such a CPU).
// Elsewhere the layer makes each chunk's product with the library and converts it after.
bool grid_product_available();
// Whether a chunked pass in T makes linear's weight gradients with the kernel (float only).
template <typename T>
bool grid_product_serves() {
  return std::is_same_v<T, float> && grid_product_available();
}

// For a layer of f inputs and o outputs and `chunks` chunks of `chunk` samples each:
//   sums[i + f j] (=, or += when add) sum over t of round(g_t[i, j] 2^shift),
//   g_t[i, j] = sum over the chunk's samples s, in order, of x[i, s] dy[j, s],
// x: (f, chunks chunk) and dy: (o, chunks chunk), column-major; each g_t[i, j] is a chain of
// fused multiply-adds from zero in sample order, so its bits depend on nothing but the two
// columns' values (no address, no width, no thread). |g_t 2^shift| must stay below 2^62 (the
// grid's bound). Only where grid_product_available().
// scratch: grid_product_scratch_bytes(f, o, chunks chunk) bytes for the packed operands.
void grid_product(const float* x, Index f, const float* dy, Index o, Index chunk, Index chunks, int shift,
                  int64_t* sums, bool add, float* scratch);
size_t grid_product_scratch_bytes(Index f, Index o, Index samples);

}  // namespace mpiddp::kernels
