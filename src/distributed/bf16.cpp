#include "mpiddp/distributed/bf16.hpp"

#include <algorithm>

namespace mpiddp::distributed {

void compress_bf16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = to_bf16(in[i]);
}

void decompress_bf16(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = from_bf16(in[i]);
}

void sum_bf16_parts(const uint16_t* parts, int k, size_t stride, size_t n, float scale,
                    uint16_t* out) {
  // Blocks of float32 partial sums that stay in L1 (as sum_kernels.cpp does); out may be
  // one of the parts, so a block is written only after all of its parts have been read.
  constexpr size_t kBlock = 2048;
  alignas(64) float acc[kBlock];
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t m = std::min(kBlock, n - begin);
    std::fill_n(acc, m, 0.0f);
    for (int r = 0; r < k; ++r) {
      const uint16_t* p = parts + static_cast<size_t>(r) * stride + begin;
      for (size_t i = 0; i < m; ++i) acc[i] += from_bf16(p[i]);
    }
    for (size_t i = 0; i < m; ++i) out[begin + i] = to_bf16(acc[i] * scale);
  }
}

}  // namespace mpiddp::distributed
