#include "mpiddp/kernels/grid_product.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "mpiddp/kernels/fixed_point.hpp"
#include "targets.hpp"

// Note [the grid product]
// In the chunked pass a linear layer's weight gradient is C/N products of B/C samples each,
// every one converted onto the int64 grid and added (Note [gradients onto the grid] in
// src/train/gradient_grid.cpp). Made with a library, each chunk's product is a small GEMM
// (mlp: 1024 x 32 x 16 per block, 26 blocks x 8 chunks a layer), written to memory, read back
// to convert, and its int64 sums read and written again per chunk: on a Zen 5 that took 2.7
// ms a step for mlp's 1024 x 1024 layer, against 1.25 ms for the default mode's one product
// of 128 samples. Here one kernel keeps a tile of weights in registers: each chunk's
// sums are fused multiply-adds from zero in sample order, converted to int64 in registers
// and added to int64 sums, so the int64 sums are written once, after the rank's last chunk.
// Each value is a chain of multiply-adds over its chunk's samples in order, whatever the
// addresses, the tile or the CPU's vector width: the same bits at every N and at every
// instruction-set level by construction, not by measurement (Note [column bits by
// measurement] does not apply). The conversion is to_fixed's: v 2^shift, rounded to nearest,
// ties to even, exactly (v 2^shift is exact in double, and in float too where 2^shift is a
// normal float, except below 2^-126, which rounds to 0 either way).
//
// Levels (Note [kernels per instruction set] in src/kernels/isa.cpp): the portable reference,
// one multiply-add chain at a time; AVX2, tiles of 16 x 4 whose conversion works on the
// double's exponent (AVX2 has no conversion to int64); AVX-512, tiles of 32 x 4 converted by
// vcvtps2qq / vcvtpd2qq. All three pack the operands the same way.

namespace mpiddp::kernels {
namespace {

constexpr Index kRows = 32;    // a packed block's rows (AVX-512: a tile's; AVX2: two tiles')
constexpr Index kColumns = 4;  // a tile's columns: the outputs sharing each row's loads
// Columns in bands of kBand: inside one, a row block of x stays in L1 while the band's
// columns pass, and the tiles' int64 sums land on the band's few pages (the sums lie a
// column, f int64, apart: sweeping every column per row block touched every page of them
// each time, in the shared window's small pages).
constexpr Index kBand = 64;

struct Packed {
  const float* dy_columns;  // (groups, samples, kColumns)
  const float* x_rows;      // (row_blocks, samples, kRows)
  Index samples, row_blocks;
};

// Both operands packed first, so that a tile reads them in order: x's rows and dy's columns
// lie a sample apart (4 KiB at 1024 features), and such loads kept missing L1. dy as groups of
// kColumns outputs, each sample's values side by side; x as blocks of kRows rows, each
// sample's kRows values side by side; zeros past o and f.
Packed pack(const float* x, Index f, const float* dy, Index o, Index samples, float* scratch) {
  const Index groups = (o + kColumns - 1) / kColumns;
  const Index row_blocks = (f + kRows - 1) / kRows;
  float* dy_columns = scratch;
  float* x_rows = scratch + groups * samples * kColumns;
  for (Index g = 0; g < groups; ++g)
    for (Index s = 0; s < samples; ++s)
      for (Index c = 0; c < kColumns; ++c) {
        const Index j = g * kColumns + c;
        dy_columns[(g * samples + s) * kColumns + c] = j < o ? dy[s * o + j] : 0.0f;
      }
  for (Index b = 0; b < row_blocks; ++b)
    for (Index s = 0; s < samples; ++s)
      for (Index r = 0; r < kRows; ++r) {
        const Index i = b * kRows + r;
        x_rows[(b * samples + s) * kRows + r] = i < f ? x[s * f + i] : 0.0f;
      }
  return {dy_columns, x_rows, samples, row_blocks};
}

// ---- The portable reference: the definition, a chain at a time ----------------------------

void grid_product_reference(const float* x, Index f, const float* dy, Index o, Index chunk, Index chunks, int shift,
                            int64_t* sums, bool add, float* scratch) {
  float* chain = scratch;  // (f): one output column's chains, side by side
  for (Index j = 0; j < o; ++j) {
    int64_t* out = sums + j * f;
    for (Index t = 0; t < chunks; ++t) {
      std::fill_n(chain, f, 0.0f);
      for (Index s = t * chunk; s < (t + 1) * chunk; ++s) {
        const float d = dy[s * o + j];
        for (Index i = 0; i < f; ++i) chain[i] = std::fma(x[s * f + i], d, chain[i]);
      }
      const bool first = t == 0 && !add;
      for (Index i = 0; i < f; ++i) out[i] = (first ? 0 : out[i]) + to_fixed(chain[i], shift);
    }
  }
}

// ---- AVX2 -----------------------------------------------------------------------------------

namespace avx2 {

constexpr Index kTileRows = 16;  // two vectors of 8 floats: 8 accumulators for 4 columns

// fixed[0..8) += round(v 2^shift) for the 8 floats of v: in double, where the product is
// exact; the rounding by vroundpd (to nearest, ties to even); then, as AVX2 has no conversion
// to int64, the integer r = m 2^e with |m| < 2^24 (r has float's 24 significant bits at most),
// m by the magic number 2^52 + 2^51 and the shift by vpsllvq.
MPIDDP_TARGET_AVX2 MPIDDP_ALWAYS_INLINE void add_converted(__m256 v, __m256d scale, int64_t* fixed) {
  const __m256d magic = _mm256_set1_pd(6755399441055744.0);  // 2^52 + 2^51
  const __m256i magic_bits = _mm256_castpd_si256(magic);
  const __m256i exponent_mask = _mm256_set1_epi64x(0x7FF);
  const __m256i unshift = _mm256_set1_epi64x(1023 + 23);  // biased exponent of 2^23
  const __m256i bias = _mm256_set1_epi64x(1023);
  const __m256i zero = _mm256_setzero_si256();
  for (int half = 0; half < 2; ++half) {
    const __m128 four = half == 0 ? _mm256_castps256_ps128(v) : _mm256_extractf128_ps(v, 1);
    const __m256d scaled = _mm256_mul_pd(_mm256_cvtps_pd(four), scale);
    const __m256d r = _mm256_round_pd(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i e = _mm256_sub_epi64(_mm256_and_si256(_mm256_srli_epi64(_mm256_castpd_si256(r), 52), exponent_mask), unshift);
    e = _mm256_and_si256(e, _mm256_cmpgt_epi64(e, zero));  // max(e, 0)
    const __m256d down = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_sub_epi64(bias, e), 52));  // 2^-e
    const __m256d m = _mm256_mul_pd(r, down);  // exact: an integer below 2^24 in magnitude
    const __m256i mi = _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(m, magic)), magic_bits);
    const __m256i value = _mm256_sllv_epi64(mi, e);
    int64_t* to = fixed + 4 * half;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to),
                        _mm256_add_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(to)), value));
  }
}

// The tile of rows [i, i + kTileRows) and columns [j, j + J) of a packed row block (xs: its
// first row's values, kRows apart per sample); `rows` of them below f.
template <int J>
MPIDDP_TARGET_AVX2 void tile(const float* xs0, const float* dy_columns, Index f, Index i, Index j, Index rows,
                             Index chunk, Index chunks, __m256d scale, int64_t* sums, bool add) {
  alignas(32) int64_t fixed[J][kTileRows] = {};
  for (Index t = 0; t < chunks; ++t) {
    __m256 acc[J][2];
    for (int c = 0; c < J; ++c) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
    const float* xs = xs0 + t * chunk * kRows;
    const float* ds = dy_columns + t * chunk * kColumns;
    for (Index s = 0; s < chunk; ++s, xs += kRows, ds += kColumns) {
      const __m256 a0 = _mm256_loadu_ps(xs), a1 = _mm256_loadu_ps(xs + 8);
      for (int c = 0; c < J; ++c) {
        const __m256 b = _mm256_broadcast_ss(ds + c);
        acc[c][0] = _mm256_fmadd_ps(a0, b, acc[c][0]);
        acc[c][1] = _mm256_fmadd_ps(a1, b, acc[c][1]);
      }
    }
    for (int c = 0; c < J; ++c) {
      add_converted(acc[c][0], scale, fixed[c]);
      add_converted(acc[c][1], scale, fixed[c] + 8);
    }
  }
  for (int c = 0; c < J; ++c) {
    int64_t* out = sums + (j + c) * f + i;
    for (Index r = 0; r < rows; ++r) out[r] = (add ? out[r] : 0) + fixed[c][r];
  }
}

template <int J = kColumns - 1>
MPIDDP_TARGET_AVX2 void last_tile(const float* xs, const float* dy_columns, Index f, Index i, Index j, Index columns,
                                  Index rows, Index chunk, Index chunks, __m256d scale, int64_t* sums, bool add) {
  if constexpr (J >= 1) {
    if (columns == J) tile<J>(xs, dy_columns, f, i, j, rows, chunk, chunks, scale, sums, add);
    else last_tile<J - 1>(xs, dy_columns, f, i, j, columns, rows, chunk, chunks, scale, sums, add);
  }
}

MPIDDP_TARGET_AVX2 void grid_product(const float* x, Index f, const float* dy, Index o, Index chunk, Index chunks,
                                     int shift, int64_t* sums, bool add, float* scratch) {
  const Packed p = pack(x, f, dy, o, chunk * chunks, scratch);
  const __m256d scale = _mm256_set1_pd(power_of_two(shift));
  for (Index band = 0; band < o; band += kBand) {
    const Index band_end = std::min(o, band + kBand);
    for (Index b = 0; b < p.row_blocks; ++b)
      for (Index h = 0; h < kRows / kTileRows; ++h) {
        const Index i = b * kRows + h * kTileRows;
        if (i >= f) break;
        const Index rows = std::min(kTileRows, f - i);
        const float* xs = p.x_rows + b * p.samples * kRows + h * kTileRows;
        Index j = band;
        for (; j + kColumns <= band_end; j += kColumns)
          tile<kColumns>(xs, p.dy_columns + j * p.samples, f, i, j, rows, chunk, chunks, scale, sums, add);
        if (j < band_end)
          last_tile(xs, p.dy_columns + j * p.samples, f, i, j, band_end - j, rows, chunk, chunks, scale, sums, add);
      }
  }
}

}  // namespace avx2

// ---- AVX-512 --------------------------------------------------------------------------------

namespace avx512 {

// A tile of 32 x 4: 8 float accumulators and 16 of int64, all in registers (measured on a
// Zen 5 against 32 x 6, 16 x 12, 48 x 4 and 64 x 3, whose int64 sums spill to the stack:
// 0.77-0.93 x the time of the library's products and their conversion, the others 0.86-1.1).
constexpr int kVectors = kRows / 16;  // a tile's rows, in vectors of 16 floats

// Onto the grid, 16 floats at a time: two vectors of 8 int64 each.
struct FloatScale {
  __m512 scale;
  MPIDDP_TARGET_AVX512 void convert(__m512 v, __m512i& low, __m512i& high) const {
    const __m512 scaled = _mm512_mul_ps(v, scale);
    low = _mm512_cvtps_epi64(_mm512_castps512_ps256(scaled));
    high = _mm512_cvtps_epi64(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(scaled), 1)));
  }
};
struct DoubleScale {
  __m512d scale;
  MPIDDP_TARGET_AVX512 void convert(__m512 v, __m512i& low, __m512i& high) const {
    const __m256 upper = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    low = _mm512_cvtpd_epi64(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), scale));
    high = _mm512_cvtpd_epi64(_mm512_mul_pd(_mm512_cvtps_pd(upper), scale));
  }
};

// The tile of rows [i, i + kRows) and columns [j, j + J): kVectors vectors of 16 rows each,
// masked past f (rows: one 16-bit mask per vector).
template <int J, typename Scale>
MPIDDP_TARGET_AVX512 void tile(const float* x_rows, const float* dy_columns, Index f, Index i, Index j,
                               const __mmask16* rows, Index chunk, Index chunks, const Scale& scale, int64_t* sums,
                               bool add) {
  __m512i fixed[J][2 * kVectors];
  for (int c = 0; c < J; ++c)
    for (int q = 0; q < 2 * kVectors; ++q) fixed[c][q] = _mm512_setzero_si512();
  for (Index t = 0; t < chunks; ++t) {
    __m512 acc[J][kVectors];
    for (int c = 0; c < J; ++c)
      for (int v = 0; v < kVectors; ++v) acc[c][v] = _mm512_setzero_ps();
    const float* xs = x_rows + t * chunk * kRows;
    const float* ds = dy_columns + t * chunk * kColumns;
    for (Index s = 0; s < chunk; ++s, xs += kRows, ds += kColumns) {
      __m512 a[kVectors];
      for (int v = 0; v < kVectors; ++v) {
        a[v] = _mm512_loadu_ps(xs + 16 * v);
        // In a register: GCC would fold the load into each multiply-add, J loads where one
        // does, and the loads, not the multiply-adds, would bound the loop.
        asm("" : "+v"(a[v]));
      }
      for (int c = 0; c < J; ++c) {
        const __m512 b = _mm512_set1_ps(ds[c]);
        for (int v = 0; v < kVectors; ++v) acc[c][v] = _mm512_fmadd_ps(a[v], b, acc[c][v]);
      }
    }
    for (int c = 0; c < J; ++c)
      for (int v = 0; v < kVectors; ++v) {
        __m512i low, high;
        scale.convert(acc[c][v], low, high);
        fixed[c][2 * v] = _mm512_add_epi64(fixed[c][2 * v], low);
        fixed[c][2 * v + 1] = _mm512_add_epi64(fixed[c][2 * v + 1], high);
      }
  }
  for (int c = 0; c < J; ++c) {
    int64_t* out = sums + (j + c) * f + i;
    for (int q = 0; q < 2 * kVectors; ++q) {
      const auto mask = static_cast<__mmask8>(rows[q / 2] >> (8 * (q % 2)));
      __m512i v = fixed[c][q];
      if (add) {
        _mm512_mask_storeu_epi64(out + 8 * q, mask, _mm512_add_epi64(v, _mm512_maskz_loadu_epi64(mask, out + 8 * q)));
      } else if (mask == 0xFF && reinterpret_cast<uintptr_t>(out + 8 * q) % 64 == 0) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(out + 8 * q), v);
      } else {
        _mm512_mask_storeu_epi64(out + 8 * q, mask, v);
      }
    }
  }
}

// The columns left over, fewer than kColumns: tile<J> for J = columns.
template <typename Scale, int J = kColumns - 1>
MPIDDP_TARGET_AVX512 void last_tile(const float* x_rows, const float* dy_columns, Index f, Index i, Index j,
                                    Index columns, const __mmask16* rows, Index chunk, Index chunks,
                                    const Scale& scale, int64_t* sums, bool add) {
  if constexpr (J >= 1) {
    if (columns == J) tile<J>(x_rows, dy_columns, f, i, j, rows, chunk, chunks, scale, sums, add);
    else last_tile<Scale, J - 1>(x_rows, dy_columns, f, i, j, columns, rows, chunk, chunks, scale, sums, add);
  }
}

template <typename Scale>
MPIDDP_TARGET_AVX512 void all_tiles(const Packed& p, Index f, Index o, Index chunk, Index chunks, const Scale& scale,
                                    int64_t* sums, bool add) {
  for (Index band = 0; band < o; band += kBand) {
    const Index band_end = std::min(o, band + kBand);
    for (Index b = 0; b < p.row_blocks; ++b) {
      const Index i = b * kRows;
      __mmask16 masks[kVectors];
      for (int v = 0; v < kVectors; ++v) {
        const Index in_vector = f - i - 16 * v;
        masks[v] = static_cast<__mmask16>(in_vector >= 16 ? 0xFFFF : in_vector > 0 ? (1u << in_vector) - 1 : 0);
      }
      const float* rows = p.x_rows + b * p.samples * kRows;
      Index j = band;
      for (; j + kColumns <= band_end; j += kColumns)
        tile<kColumns>(rows, p.dy_columns + j * p.samples, f, i, j, masks, chunk, chunks, scale, sums, add);
      if (j < band_end)
        last_tile(rows, p.dy_columns + j * p.samples, f, i, j, band_end - j, masks, chunk, chunks, scale, sums, add);
    }
  }
}

MPIDDP_TARGET_AVX512 void grid_product(const float* x, Index f, const float* dy, Index o, Index chunk, Index chunks,
                                       int shift, int64_t* sums, bool add, float* scratch) {
  const Packed p = pack(x, f, dy, o, chunk * chunks, scratch);
  const double scale = power_of_two(shift);
  if (shift >= -126 && shift <= 127)
    all_tiles(p, f, o, chunk, chunks, FloatScale{_mm512_set1_ps(static_cast<float>(scale))}, sums, add);
  else
    all_tiles(p, f, o, chunk, chunks, DoubleScale{_mm512_set1_pd(scale)}, sums, add);
  _mm_sfence();  // the non-temporal stores are seen before the sums are read
}

}  // namespace avx512

}  // namespace

const Dispatched<GridProductKernel>& grid_product_variants() {
  static const Dispatched<GridProductKernel> variants(
      {grid_product_reference, avx2::grid_product, avx512::grid_product, nullptr, nullptr});
  return variants;
}

size_t grid_product_scratch_bytes(Index f, Index o, Index samples) {
  const Index groups = (o + kColumns - 1) / kColumns, row_blocks = (f + kRows - 1) / kRows;
  // The packed operands; the reference's one column of chains (f floats) fits in them.
  return static_cast<size_t>(groups * kColumns + row_blocks * kRows) * static_cast<size_t>(samples) * sizeof(float);
}

void grid_product(const float* x, Index f, const float* dy, Index o, Index chunk, Index chunks, int shift,
                  int64_t* sums, bool add, float* scratch) {
  grid_product_variants()()(x, f, dy, o, chunk, chunks, shift, sums, add, scratch);
}

}  // namespace mpiddp::kernels
