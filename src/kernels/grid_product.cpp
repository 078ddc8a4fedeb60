#include "mpiddp/kernels/grid_product.hpp"

#include <stdexcept>

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>

#include "mpiddp/kernels/fixed_point.hpp"
#endif

// Note [the grid product]
// In the chunked pass a linear layer's weight gradient is C/N products of B/C samples each,
// every one converted onto the int64 grid and added (Note [gradients onto the grid] in
// src/train/gradient_grid.cpp). Made with a library, each chunk's product is a small GEMM
// (mlp: 1024 x 32 x 16 per block, 26 blocks x 8 chunks a layer), written to memory, read back
// to convert, and its int64 sums read and written again per chunk: on a Zen 5 that took 2.7
// ms a step for mlp's 1024 x 1024 layer, against 1.25 ms for the default mode's one product
// of 128 samples. Here one kernel keeps a tile of 32 x 4 weights in registers: each chunk's
// sums are fused multiply-adds from zero in sample order, converted to int64 in registers
// and added to int64 sums that are also registers, so the int64 sums are written once, after
// the rank's last chunk. Each value is a chain of multiply-adds over its chunk's samples in
// order, whatever the addresses, the tile or the CPU's vector width: the same bits at every
// N by construction, not by measurement (Note [column bits by measurement] does not apply).
// The conversion is to_fixed's: v 2^shift, rounded to nearest, ties to even (vcvtps2qq
// under the default MXCSR mode); in float when 2^shift is a normal float (the product is
// then exact or, below 2^-126, rounds to 0 either way), else in double.

namespace mpiddp::kernels {

#if defined(__AVX512F__) && defined(__AVX512DQ__)

bool grid_product_available() { return true; }

namespace {

// A tile of 32 x 4: 8 float accumulators and 16 of int64, all in registers (measured on a
// Zen 5 against 32 x 6, 16 x 12, 48 x 4 and 64 x 3, whose int64 sums spill to the stack:
// 0.77-0.93 x the time of the library's products and their conversion, the others 0.86-1.1).
constexpr int kVectors = 2;  // a tile's rows, in vectors of 16 floats
constexpr Index kRows = 16 * kVectors;
constexpr Index kColumns = 4;  // a tile's columns: the outputs sharing each row's loads

// Onto the grid, 16 floats at a time: two vectors of 8 int64 each.
struct FloatScale {
  __m512 scale;
  void convert(__m512 v, __m512i& low, __m512i& high) const {
    const __m512 scaled = _mm512_mul_ps(v, scale);
    low = _mm512_cvtps_epi64(_mm512_castps512_ps256(scaled));
    high = _mm512_cvtps_epi64(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(scaled), 1)));
  }
};
struct DoubleScale {
  __m512d scale;
  void convert(__m512 v, __m512i& low, __m512i& high) const {
    const __m256 upper = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    low = _mm512_cvtpd_epi64(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), scale));
    high = _mm512_cvtpd_epi64(_mm512_mul_pd(_mm512_cvtps_pd(upper), scale));
  }
};

// The tile of rows [i, i + kRows) and columns [j, j + J): kVectors vectors of 16 rows each,
// masked past f (rows: one 16-bit mask per vector).
template <int J, typename Scale>
void tile(const float* x_rows, const float* dy_columns, Index f, Index i, Index j, const __mmask16* rows,
          Index chunk, Index chunks, const Scale& scale, int64_t* sums, bool add) {
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
void last_tile(const float* x_rows, const float* dy_columns, Index f, Index i, Index j, Index columns,
               const __mmask16* rows, Index chunk, Index chunks, const Scale& scale, int64_t* sums, bool add) {
  if constexpr (J >= 1) {
    if (columns == J) tile<J>(x_rows, dy_columns, f, i, j, rows, chunk, chunks, scale, sums, add);
    else last_tile<Scale, J - 1>(x_rows, dy_columns, f, i, j, columns, rows, chunk, chunks, scale, sums, add);
  }
}

template <typename Scale>
void all_tiles(const float* x, Index f, const float* dy, Index o, Index chunk, Index chunks, const Scale& scale,
               int64_t* sums, bool add, float* scratch) {
  // Both operands packed first, so that a tile reads them in order: x's rows and dy's
  // columns lie a sample apart (4 KiB at 1024 features), and such loads kept missing L1.
  // dy as groups of kColumns outputs, each sample's values side by side; x as blocks of kRows
  // rows, each sample's kRows values side by side, zeros past f.
  const Index samples = chunk * chunks;
  const Index groups = (o + kColumns - 1) / kColumns;
  const Index row_blocks = (f + kRows - 1) / kRows;
  float* dy_columns = scratch;                            // (groups, samples, kColumns)
  float* x_rows = scratch + groups * samples * kColumns;  // (row_blocks, samples, kRows)
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
  // Columns in bands of kBand: inside one, a row block of x stays in L1 while the band's
  // columns pass, and the tiles' int64 sums land on the band's few pages (the sums lie a
  // column, f int64, apart: sweeping every column per row block touched every page of them
  // each time, in the shared window's small pages).
  constexpr Index kBand = 64;
  for (Index band = 0; band < o; band += kBand) {
    const Index band_end = o - band < kBand ? o : band + kBand;
    for (Index b = 0; b < row_blocks; ++b) {
      const Index i = b * kRows;
      __mmask16 masks[kVectors];
      for (int v = 0; v < kVectors; ++v) {
        const Index in_vector = f - i - 16 * v;
        masks[v] = static_cast<__mmask16>(in_vector >= 16 ? 0xFFFF : in_vector > 0 ? (1u << in_vector) - 1 : 0);
      }
      const float* rows = x_rows + b * samples * kRows;
      Index j = band;
      for (; j + kColumns <= band_end; j += kColumns)
        tile<kColumns>(rows, dy_columns + j * samples, f, i, j, masks, chunk, chunks, scale, sums, add);
      if (j < band_end)
        last_tile(rows, dy_columns + j * samples, f, i, j, band_end - j, masks, chunk, chunks, scale, sums, add);
    }
  }
}

}  // namespace

size_t grid_product_scratch_bytes(Index f, Index o, Index samples) {
  const Index groups = (o + kColumns - 1) / kColumns, row_blocks = (f + kRows - 1) / kRows;
  return static_cast<size_t>(groups * kColumns + row_blocks * kRows) * static_cast<size_t>(samples) * sizeof(float);
}

void grid_product(const float* x, Index f, const float* dy, Index o, Index chunk, Index chunks, int shift,
                  int64_t* sums, bool add, float* scratch) {
  const double scale = power_of_two(shift);
  if (shift >= -126 && shift <= 127)
    all_tiles(x, f, dy, o, chunk, chunks, FloatScale{_mm512_set1_ps(static_cast<float>(scale))}, sums, add, scratch);
  else
    all_tiles(x, f, dy, o, chunk, chunks, DoubleScale{_mm512_set1_pd(scale)}, sums, add, scratch);
  _mm_sfence();
}

#else

bool grid_product_available() { return false; }

size_t grid_product_scratch_bytes(Index, Index, Index) { return 0; }

void grid_product(const float*, Index, const float*, Index, Index, Index, int, int64_t*, bool, float*) {
  throw std::logic_error("grid_product: not in this build (needs AVX-512 F and DQ)");
}

#endif

}  // namespace mpiddp::kernels
