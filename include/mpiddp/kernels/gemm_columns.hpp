#pragma once
// Whether the matrix-product library in use gives each column of a product the same bits at
// every width: what the deterministic mode's chunked pass needs of the library that computes
// it (Note [the chunked pass] in src/train/deterministic_step.cpp).
//
// Note [column bits by measurement]
// A GEMM computes column j of op(a) b from column j of b alone, but the order of its
// additions may follow the product's width: the kernel chosen for the shape, the blocking,
// a last and narrower panel. Eigen, compiled in, gives a column the same bits at every width
// that is a whole number of its nr-column panels (measured; Linear::supports_chunked_pass).
// The libraries pick their kernels at run time, for the CPU and the shape: oneDNN 2.6 on an
// AMD Zen 5 at one thread gives a column the same bits at every multiple of 16 columns up to
// 192 for a 1024 x 784 product but only up to 96 for a 1024 x 1024 one, and other bits at
// multiples of 12; OpenBLAS 0.3.21 gives other bits at every width (docs/benchmarks.md). So
// nothing is assumed of a library: before a chunked pass uses one, its products are computed
// on pseudo-random values at every width the pass can take at any world size, and every
// column is compared with the same column of its own chunk's product, in the mode the layer
// uses (a product that adds to the bias, one that overwrites), and every product of a chunk
// (the weight gradients too) is computed again with its operands at other alignments. One
// differing bit at every candidate width of a piece, or at another address, and the pass
// does not use the library. The widths are few because the pass cuts its products into
// pieces of at most so many columns, chosen once, the same at every N (kernels::multiply_in_pieces).
#include <vector>

#include "mpiddp/kernels/gemm.hpp"

namespace mpiddp::kernels {

// The candidates for the most columns of one forward or input-gradient product in a chunked
// pass with chunks of `chunk` columns, widest first: chunk, 2 chunk, 4 chunk, ... up to 128
// columns (a width at which the libraries run near their peak), and at least one chunk. A
// library's kernel can change above some width (oneDNN on Zen 5: above 96 columns for a
// 1024 x 1024 product, above 192 for 1024 x 784), so the trainer takes the widest at which
// the column bits hold.
std::vector<Index> chunked_product_pieces(Index chunk);

// Every width of a product that a rank makes in a chunked pass of `chunks` chunks of `chunk`
// columns cut into pieces of at most `piece` columns, at any world size that divides chunks:
// a rank holds chunks/N chunks. Ascending.
std::vector<Index> chunked_product_widths(Index chunks, Index chunk, Index piece);

// Whether the backend in use computes every column of each of `products` (op_b must be
// kNone; n is ignored) at each of `widths` (multiples of chunk) with the bits it has in a
// product of `chunk` columns, on pseudo-random values. Local: every rank would find the same.
template <typename T>
bool column_bits_hold(const std::vector<GemmShape>& products, Index chunk, const std::vector<Index>& widths);

// Whether the backend in use computes each of `products` (as given, at its width) with the
// same bits when its operands start 1, 2 or 3 values further on: a chunk's operands lie at
// another address at every N (its columns of the rank's batch), and a library may pick its
// kernel or its tail by alignment. Local.
template <typename T>
bool address_bits_hold(const std::vector<GemmShape>& products);

// The products of `calls` in `role` whose columns are samples (op_b kNone), once each: a
// linear layer's forward or input-gradient products, which a chunked pass makes over all of a
// rank's chunks at once.
std::vector<GemmShape> column_products(const std::vector<GemmCall>& calls, GemmRole role);

}  // namespace mpiddp::kernels
