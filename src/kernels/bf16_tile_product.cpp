// Attention's tile products under compute.precision "bf16" on vdpbf16ps (AVX512_BF16):
// gemm_detail::bf16_tile_product, called by kernels::multiply_tile.
//
// Note [bf16 tiles]
// A tile is small (the gpt workload's are (64, 64) by a depth of 32 or 64): a library call costs
// more than it computes, so until this kernel the bf16 tiles were Eigen's float32 products of
// rounded copies, and took a sixth of a bf16 gpt step. Here both operands are rounded (to nearest,
// ties to even, core/bf16.hpp, subnormals kept) straight into packed pairs along the depth, and
// vdpbf16ps adds two exact products into each float32 lane per instruction:
//   a, packed as [depth pair p][row i]: one 32-bit pair (a(i, 2p), a(i, 2p + 1)) per row, rows
//     padded to a multiple of 16 with zeros, so 16 rows load as one vector;
//   b, packed as one 32-bit pair (b(2p, j), b(2p + 1, j)) per column, broadcast to every lane;
//   an odd depth's last pair is padded with a zero.
// The products are exact (8 + 8 significant bits) and every lane sums its own element's terms in
// float32, pair by pair (within a pair, the odd depth's product first): the sum's error is within
// gamma_(k+1) of the terms' magnitudes, as the reference's (Eigen on the rounded copies) is, so
// the two agree within twice that (tests/kernels/precision_test.cpp, Bf16Tile). vdpbf16ps reads a
// subnormal bf16 as zero and flushes a subnormal result, as oneDNN's bf16 products on the same
// instruction do. That relative bound does not cover it: a flushed operand changes the sum by less
// than 2^-126 times the other operand, an absolute error, which softmax's smallest probabilities
// (exp of a score gap past 87) can meet. The tests keep their operands normal.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gemm_backends/gemm_kernels.hpp"
#include "mpiddp/kernels/isa.hpp"
#include "targets.hpp"

namespace mpiddp::kernels::gemm_detail {
namespace {

namespace avx512_bf16_tiles {

constexpr Index kLanes = 16;  // float32 lanes of a ZMM register: the rows one vector holds

Index padded_rows(Index rows) { return (rows + kLanes - 1) / kLanes * kLanes; }

// Each lane's float32 rounded to bf16 (core/bf16.hpp's to_bf16), left in the lane's upper 16 bits;
// the lower 16 bits are left over from the rounding and are never read.
MPIDDP_TARGET_AVX512_BF16 MPIDDP_ALWAYS_INLINE __m512i round_lanes(__m512 values) {
  const __m512i bits = _mm512_castps_si512(values);
  const __m512i lowest_kept = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), lowest_kept);
  // A NaN stays a quiet NaN: truncating one whose payload is only in the low bits would give Inf.
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(bits, _mm512_set1_epi32(0x00400000)));
}

// The first `count` of a vector's 16 lanes (count >= 0).
MPIDDP_TARGET_AVX512_BF16 MPIDDP_ALWAYS_INLINE __mmask16 first_lanes(Index count) {
  return static_cast<__mmask16>(count >= kLanes ? 0xffff : (1u << count) - 1);
}

// The 16 floats at x, those of lanes outside `live` zero and not read. A whole vector loads
// unmasked: a masked load costs more than a plain one on some CPUs (Zen 5), and these loads were
// the packing's hottest instructions.
MPIDDP_TARGET_AVX512_BF16 MPIDDP_ALWAYS_INLINE __m512 load_lanes(const float* x, __mmask16 live) {
  return live == 0xffff ? _mm512_loadu_ps(x) : _mm512_maskz_loadu_ps(live, x);
}

// The pairs of two depths' rows, 16 values side by side in each: lane l = (bf16 of even[l] in the
// low half, bf16 of odd[l] in the high); the odd half zero without an odd depth (has_odd false),
// lanes outside `live` zero.
MPIDDP_TARGET_AVX512_BF16 MPIDDP_ALWAYS_INLINE __m512i pairs_across(const float* even, const float* odd, bool has_odd,
                                                                   __mmask16 live) {
  const __m512i e = round_lanes(load_lanes(even, live));
  const __m512i o = round_lanes(load_lanes(odd, has_odd ? live : 0));
  const __m512i paired =
      _mm512_or_si512(_mm512_srli_epi32(e, 16), _mm512_and_si512(o, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  return _mm512_maskz_mov_epi32(live, paired);
}

// The pairs of `count` (at most 32) consecutive floats: pair p = (bf16 of x[2p], bf16 of x[2p+1]),
// missing values zero. vpermt2w takes every element's upper half, in order, from the two vectors.
MPIDDP_TARGET_AVX512_BF16 MPIDDP_ALWAYS_INLINE __m512i pairs_of_run(const float* x, Index count) {
  const __m512i low = round_lanes(load_lanes(x, first_lanes(count)));
  const __m512i high = round_lanes(load_lanes(x + kLanes, first_lanes(std::max<Index>(count - kLanes, 0))));
  const __m512i upper_halves = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                                                25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_permutex2var_epi16(low, upper_halves, high);
}

// op(a) (m, k) packed as [pair p][row i], rows padded to `rows` (a multiple of 16) with zeros.
MPIDDP_TARGET_AVX512_BF16 void pack_rows_operand(ConstStridedView<float> a, Op op, Index m, Index k, Index rows,
                                                 uint32_t* packed) {
  const Index pairs = (k + 1) / 2;
  const Index stride = a.outerStride();
  if (op == Op::kNone) {  // op(a)(i, d) = a[i + d stride]: each depth a column, contiguous in i
    for (Index p = 0; p < pairs; ++p) {
      const float* even = a.data() + 2 * p * stride;
      const float* odd = even + stride;
      const bool has_odd = 2 * p + 1 < k;
      for (Index i = 0; i < rows; i += kLanes)
        _mm512_storeu_si512(packed + p * rows + i,
                            pairs_across(even + i, odd + i, has_odd, first_lanes(std::max<Index>(m - i, 0))));
    }
    return;
  }
  // op(a)(i, d) = a[d + i stride]: each row contiguous in depth, its pairs scattered down the rows.
  const __m512i down_rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32(static_cast<int>(rows)));
  for (Index i = 0; i < m; ++i)
    for (Index d = 0; d < k; d += 2 * kLanes) {
      const __m512i pairs_here = pairs_of_run(a.data() + d + i * stride, std::min<Index>(k - d, 2 * kLanes));
      _mm512_mask_i32scatter_epi32(packed + (d / 2) * rows + i, first_lanes(pairs - d / 2), down_rows, pairs_here, 4);
    }
  for (Index p = 0; p < pairs; ++p) std::fill(packed + p * rows + m, packed + (p + 1) * rows, 0u);
}

// op(b) (k, n) packed as one pair per (p, column j), at packed[j column_step + p pair_step].
struct PackedColumns {
  const uint32_t* pairs;
  Index column_step, pair_step;
};

MPIDDP_TARGET_AVX512_BF16 PackedColumns pack_columns_operand(ConstStridedView<float> b, Op op, Index k, Index n,
                                                             uint32_t* packed) {
  const Index pairs = (k + 1) / 2;
  const Index stride = b.outerStride();
  if (op == Op::kNone) {  // op(b)(d, j) = b[d + j stride]: each column contiguous in depth
    for (Index j = 0; j < n; ++j)
      for (Index d = 0; d < k; d += 2 * kLanes)
        _mm512_mask_storeu_epi32(packed + j * pairs + d / 2, first_lanes(pairs - d / 2),
                                 pairs_of_run(b.data() + d + j * stride, std::min<Index>(k - d, 2 * kLanes)));
    return {packed, pairs, 1};
  }
  // op(b)(d, j) = b[j + d stride]: each depth a row of b, contiguous in j
  for (Index p = 0; p < pairs; ++p) {
    const float* even = b.data() + 2 * p * stride;
    const float* odd = even + stride;
    const bool has_odd = 2 * p + 1 < k;
    for (Index j = 0; j < n; j += kLanes) {
      const __mmask16 live = first_lanes(n - j);
      _mm512_mask_storeu_epi32(packed + p * n + j, live, pairs_across(even + j, odd + j, has_odd, live));
    }
  }
  return {packed, 1, n};
}

// c's rows [i, i + 16 kVectors) by columns [j, j + kColumns), all depth pairs: the accumulators
// stay in registers (at most 4 x 4 of them).
template <int kVectors, int kColumns>
MPIDDP_TARGET_AVX512_BF16 void multiply_block(StridedView<float> c, Index i, Index j, Index m, const uint32_t* a,
                                              Index rows, const PackedColumns& b, Index pairs, bool add) {
  __m512 sum[kVectors][kColumns];
  __mmask16 live[kVectors];
  for (int v = 0; v < kVectors; ++v) live[v] = first_lanes(m - i - v * kLanes);
  for (int v = 0; v < kVectors; ++v)
    for (int col = 0; col < kColumns; ++col)
      sum[v][col] = add ? _mm512_maskz_loadu_ps(live[v], &c(i + v * kLanes, j + col)) : _mm512_setzero_ps();
  for (Index p = 0; p < pairs; ++p) {
    __m512i rows_of_a[kVectors];
    for (int v = 0; v < kVectors; ++v) rows_of_a[v] = _mm512_loadu_si512(a + p * rows + i + v * kLanes);
    for (int col = 0; col < kColumns; ++col) {
      const __m512i pair = _mm512_set1_epi32(static_cast<int>(b.pairs[(j + col) * b.column_step + p * b.pair_step]));
      for (int v = 0; v < kVectors; ++v)
        sum[v][col] = _mm512_dpbf16_ps(sum[v][col], (__m512bh)rows_of_a[v], (__m512bh)pair);
    }
  }
  for (int v = 0; v < kVectors; ++v)
    for (int col = 0; col < kColumns; ++col) _mm512_mask_storeu_ps(&c(i + v * kLanes, j + col), live[v], sum[v][col]);
}

using BlockKernel = void (*)(StridedView<float>, Index, Index, Index, const uint32_t*, Index, const PackedColumns&, Index,
                             bool);
template <int kVectors>
constexpr BlockKernel kBlocksOf[4] = {multiply_block<kVectors, 1>, multiply_block<kVectors, 2>,
                                      multiply_block<kVectors, 3>, multiply_block<kVectors, 4>};
constexpr const BlockKernel* kBlocks[4] = {kBlocksOf<1>, kBlocksOf<2>, kBlocksOf<3>, kBlocksOf<4>};

MPIDDP_TARGET_AVX512_BF16 bool tile_product_avx512_bf16(StridedView<float> c, ConstStridedView<float> a, Op op_a,
                                                        ConstStridedView<float> b, Op op_b, Accumulate mode) {
  const Index m = c.rows(), n = c.cols(), k = op_a == Op::kNone ? a.cols() : a.rows();
  const Index rows = padded_rows(m), pairs = (k + 1) / 2;
  thread_local std::vector<uint32_t> packed_a, packed_b;
  if (packed_a.size() < static_cast<size_t>(rows * pairs)) packed_a.resize(static_cast<size_t>(rows * pairs));
  if (packed_b.size() < static_cast<size_t>(n * pairs)) packed_b.resize(static_cast<size_t>(n * pairs));
  pack_rows_operand(a, op_a, m, k, rows, packed_a.data());
  const PackedColumns columns = pack_columns_operand(b, op_b, k, n, packed_b.data());
  const bool add = mode == Accumulate::kAdd;
  for (Index i = 0; i < m; i += 4 * kLanes) {
    const Index vectors = std::min<Index>((m - i + kLanes - 1) / kLanes, 4);
    for (Index j = 0; j < n; j += 4) {
      const Index width = std::min<Index>(n - j, 4);
      kBlocks[vectors - 1][width - 1](c, i, j, m, packed_a.data(), rows, columns, pairs, add);
    }
  }
  return true;
}

}  // namespace avx512_bf16_tiles

// Below AVX512_BF16 there is no kernel of ours: multiply_tile computes the reference's tile.
bool tile_product_none(StridedView<float>, ConstStridedView<float>, Op, ConstStridedView<float>, Op, Accumulate) {
  return false;
}

}  // namespace

bool bf16_tile_product(StridedView<float> c, ConstStridedView<float> a, Op op_a, ConstStridedView<float> b, Op op_b,
                       Accumulate mode) {
  using Kernel = bool (*)(StridedView<float>, ConstStridedView<float>, Op, ConstStridedView<float>, Op, Accumulate);
  static const Dispatched<Kernel> variants(
      {tile_product_none, nullptr, nullptr, avx512_bf16_tiles::tile_product_avx512_bf16, nullptr});
  return variants()(c, a, op_a, b, op_b, mode);
}

}  // namespace mpiddp::kernels::gemm_detail
