#pragma once
// Attention's naive kernel: each head's (T, T) probabilities kept from forward to backward.
// Legend and calling convention: kernels/attention_head.hpp.
#include "mpiddp/kernels/attention_head.hpp"

namespace mpiddp::kernels {

// kept: the probabilities P, (T, T). Workspace: the scores' gradient (T, T), and with dropout
// the mask (T, T) (backward draws it again rather than keep every head's).
template <typename T>
AttentionKernel<T> naive_attention();

}  // namespace mpiddp::kernels
