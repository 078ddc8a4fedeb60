#pragma once
// A linear layer's weight gradient straight onto the deterministic mode's integer grid, chunk
// by chunk, in one kernel of our own (Note [the grid product] in src/kernels/grid_product.cpp),
// with a variant per instruction-set level that all give the same integers.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "mpiddp/core/types.hpp"
#include "mpiddp/kernels/isa.hpp"

namespace mpiddp::kernels {

// Whether a chunked pass in T makes linear's weight gradients with the kernel: float's.
template <typename T>
bool grid_product_serves() {
  return std::is_same_v<T, float>;
}

// For a layer of f inputs and o outputs and `chunks` chunks of `chunk` samples each:
//   sums[i + f j] (=, or += when add) sum over t of round(g_t[i, j] 2^shift),
//   g_t[i, j] = sum over the chunk's samples s, in order, of x[i, s] dy[j, s],
// x: (f, chunks chunk) and dy: (o, chunks chunk), column-major; each g_t[i, j] is a chain of
// fused multiply-adds from zero in sample order, so its bits depend on nothing but the two
// columns' values (no address, no width, no thread, no instruction-set level). |g_t 2^shift|
// must stay below 2^62 (the grid's bound).
// scratch: grid_product_scratch_bytes(f, o, chunks chunk) bytes for the packed operands.
void grid_product(const float* x, Index f, const float* dy, Index o, Index chunk, Index chunks, int shift,
                  int64_t* sums, bool add, float* scratch);
size_t grid_product_scratch_bytes(Index f, Index o, Index samples);

// The variants grid_product chooses from (the portable reference, AVX2, AVX-512), for tests
// and benchmarks that run each level.
using GridProductKernel = void (*)(const float*, Index, const float*, Index, Index, Index, int, int64_t*, bool,
                                   float*);
const Dispatched<GridProductKernel>& grid_product_variants();

}  // namespace mpiddp::kernels
