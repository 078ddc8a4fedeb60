#pragma once
// The compressed exchange's arrays of bfloat16 (core/bf16.hpp has the number and its rounding).
// MPI-free and allocation-free, the arithmetic of the compressed exchange.
#include <cstddef>
#include <cstdint>

#include "mpiddp/core/bf16.hpp"

namespace mpiddp::distributed {

using mpiddp::from_bf16;
using mpiddp::to_bf16;

// out[i] = to_bf16(in[i]): in: (n) -> out: (n).
void compress_bf16(const float* in, uint16_t* out, size_t n);
// out[i] = from_bf16(in[i]): in: (n) -> out: (n).
void decompress_bf16(const uint16_t* in, float* out, size_t n);
// out[i] = to_bf16((from_bf16(parts[0][i]) + ... + from_bf16(parts[k-1][i])) * scale), the
// sum in float32 in part order: parts: k rows of stride elements, (k, stride) -> out: (n),
// n <= stride. One rounding to bf16 per element, after the float32 sum.
void sum_bf16_parts(const uint16_t* parts, int k, size_t stride, size_t n, float scale,
                    uint16_t* out);

}  // namespace mpiddp::distributed
