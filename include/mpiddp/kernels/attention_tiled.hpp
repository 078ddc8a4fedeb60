#pragma once
// Attention's tiled kernel, as FlashAttention computes it: no (T, T) matrix in memory, only
// each query's log-sum-exp kept from forward to backward, O(T) per head and sample.
// Legend and calling convention: kernels/attention_head.hpp; the algorithm: Note [the running
// softmax] in src/kernels/attention_tiled.cpp.
#include "mpiddp/kernels/attention_head.hpp"

namespace mpiddp::kernels {

// Keys and queries per tile: a (64, 64) tile of scores, its gradient and its mask fit in L1
// and L2 alongside the blocks of q, k and v they come from.
inline constexpr Index kAttentionTile = 64;

// kept: each query's log-sum-exp L, (T). Workspace, per call: the tile's scores, their
// gradient and (with dropout) mask, (tile, tile) each; a query block's running maxima and
// sums, (tile) each; backward's D_i = dO_i . O_i, (T).
template <typename T>
AttentionKernel<T> tiled_attention();

}  // namespace mpiddp::kernels
