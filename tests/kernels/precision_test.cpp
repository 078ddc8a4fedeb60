// compute.precision's kernels (kernels/precision.hpp): the rounding of operands to bfloat16 at
// every level against core/bf16.hpp's scalar rounding; the bf16_reference product against a
// float64 product of the same rounded operands under every library; the fast bf16 product
// against the reference within the bound of Note [bf16 products] (src/kernels/bf16_product.cpp),
// skipped where the CPU lacks AVX512_BF16; and attention's tile product: the reference's exactly
// the float32 tile of rounded operands, the fast one (vdpbf16ps, Note [bf16 tiles]) within the
// same bound, skipped where the CPU lacks AVX512_BF16; and the operands converted once for
// several products (OperandCopy): their bits, and the same products.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "../support/isa_levels.hpp"
#include "mpiddp/core/bf16.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/kernels/precision.hpp"

namespace mpiddp::kernels {
namespace {

class Bf16Rounding : public testing::EveryIsaLevel {};
MPIDDP_INSTANTIATE_AT_EVERY_LEVEL(Bf16Rounding);

// Every upper half (sign, exponent, the 7 kept bits: every bf16, the NaNs and infinities
// among them) with lower halves that decide the rounding: zero, the smallest, just below
// half, exactly half (a tie: to even), just above half, the largest. Length 2^16 * 6, not a
// multiple of any vector width past the first, at an offset of one element.
TEST_P(Bf16Rounding, EveryLevelRoundsAsTheScalar) {
  const uint32_t lows[] = {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu};
  std::vector<float> in(1);
  for (uint32_t high = 0; high < 0x10000u; ++high)
    for (uint32_t low : lows) in.push_back(std::bit_cast<float>(high << 16 | low));
  const size_t n = in.size() - 1;
  std::vector<float> rounded(in.size(), 7.0f);
  std::vector<uint16_t> bits(in.size(), 7);
  round_to_bf16(in.data() + 1, rounded.data() + 1, n);
  convert_to_bf16(in.data() + 1, bits.data() + 1, n);
  EXPECT_EQ(rounded[0], 7.0f);
  EXPECT_EQ(bits[0], 7);
  for (size_t i = 1; i <= n; ++i) {
    const uint16_t expected = to_bf16(in[i]);
    ASSERT_EQ(bits[i], expected) << std::hex << std::bit_cast<uint32_t>(in[i]);
    ASSERT_EQ(std::bit_cast<uint32_t>(rounded[i]), uint32_t{expected} << 16) << std::hex << std::bit_cast<uint32_t>(in[i]);
  }
  // In place, as the header allows.
  std::vector<float> in_place(in.begin() + 1, in.end());
  round_to_bf16(in_place.data(), in_place.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(std::bit_cast<uint32_t>(in_place[i]), std::bit_cast<uint32_t>(rounded[i + 1]));
}

// A strided (rows, cols) view into a dense copy: every column rounded, nothing between the
// columns read into it, at row counts around the vector widths.
TEST_P(Bf16Rounding, ColumnsOfAStridedView) {
  std::mt19937 rng(4);
  std::uniform_int_distribution<uint32_t> bits;
  for (Index rows : {Index{1}, Index{15}, Index{16}, Index{17}, Index{32}, Index{33}}) {
    const Index cols = 7, stride = rows + 5;
    std::vector<float> in(static_cast<size_t>(stride * cols));
    for (float& v : in) v = std::bit_cast<float>(bits(rng));
    std::vector<float> out(static_cast<size_t>(rows * cols + 1), 9.0f);
    round_columns_to_bf16(in.data(), rows, cols, stride, out.data());
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(out[static_cast<size_t>(i + j * rows)]),
                  uint32_t{to_bf16(in[static_cast<size_t>(i + j * stride)])} << 16)
            << rows << " rows, element (" << i << ", " << j << ")";
    EXPECT_EQ(out.back(), 9.0f);
  }
}

TEST(Bf16Rounding, ByHand) {
  float out[4];
  const float in[4] = {1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, 1.0f + 3 * 0x1p-8f, 1.0f / 3.0f};
  round_to_bf16(in, out, 4);
  EXPECT_EQ(out[0], 1.0f);                  // a tie between 1 and 1 + 2^-7: to even, 1
  EXPECT_EQ(out[1], 1.0f + 0x1p-7f);        // just above the tie: up
  EXPECT_EQ(out[2], 1.0f + 4 * 0x1p-8f);    // a tie between 1 + 2^-7 and 1 + 2^-6: to even, up
  EXPECT_EQ(out[3], 0x1.56p-2f);            // 0.0101010101...b: 8 significant bits, 0.33398
}

// Bf16Operands of one product: op(a) (m, k), op(b) (k, n), values in [-2, 2] across a few binades,
// none subnormal (the hardware's bf16 dot products flush those, Note [bf16 products]).
struct Bf16Operands {
  Index m, n, k;
  Op op_a, op_b;
  std::vector<float> a, b, c;
};

Bf16Operands bf16_operands(Index m, Index n, Index k, Op op_a, Op op_b, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-2.0f, 2.0f);
  Bf16Operands o{m, n, k, op_a, op_b, {}, {}, {}};
  for (Index i = 0; i < m * k; ++i) o.a.push_back(unit(rng));
  for (Index i = 0; i < k * n; ++i) o.b.push_back(unit(rng));
  for (Index i = 0; i < m * n; ++i) o.c.push_back(unit(rng));
  return o;
}

// c (m, n) as `multiply` computes it in the precision in use, after c = o.c when adding.
std::vector<float> product(const Bf16Operands& o, Accumulate mode) {
  std::vector<float> c = o.c;
  const Index a_rows = o.op_a == Op::kNone ? o.m : o.k, b_rows = o.op_b == Op::kNone ? o.k : o.n;
  multiply(MatrixView<float>(c.data(), o.m, o.n), ConstMatrixView<float>(o.a.data(), a_rows, o.m * o.k / a_rows),
           o.op_a, ConstMatrixView<float>(o.b.data(), b_rows, o.k * o.n / b_rows), o.op_b, mode);
  return c;
}

// The product of the rounded operands in float64 (each term exact; the sum's own error, within
// k 2^-53 of the magnitudes, is 2^-29 of the float32 bound it is held to), and the sum of the
// terms' magnitudes, for the bound.
struct Exact {
  std::vector<double> value, magnitude;
};

Exact exact_product(const Bf16Operands& o, Accumulate mode) {
  const auto at_a = [&](Index i, Index p) {
    return o.op_a == Op::kNone ? o.a[static_cast<size_t>(i + p * o.m)] : o.a[static_cast<size_t>(p + i * o.k)];
  };
  const auto at_b = [&](Index p, Index j) {
    return o.op_b == Op::kNone ? o.b[static_cast<size_t>(p + j * o.k)] : o.b[static_cast<size_t>(j + p * o.n)];
  };
  Exact e{std::vector<double>(static_cast<size_t>(o.m * o.n)), std::vector<double>(static_cast<size_t>(o.m * o.n))};
  for (Index j = 0; j < o.n; ++j)
    for (Index i = 0; i < o.m; ++i) {
      double sum = mode == Accumulate::kAdd ? o.c[static_cast<size_t>(i + j * o.m)] : 0.0, magnitude = std::fabs(sum);
      for (Index p = 0; p < o.k; ++p) {
        const double term = static_cast<double>(from_bf16(to_bf16(at_a(i, p)))) * from_bf16(to_bf16(at_b(p, j)));
        sum += term;
        magnitude += std::fabs(term);
      }
      e.value[static_cast<size_t>(i + j * o.m)] = sum;
      e.magnitude[static_cast<size_t>(i + j * o.m)] = magnitude;
    }
  return e;
}

// gamma_n = n u / (1 - n u), u = 2^-24: a float32 sum of n + 1 terms in any order is within
// gamma_n times the sum of their magnitudes of the exact sum (Higham, Accuracy and Stability
// of Numerical Algorithms, 2nd ed., (3.5)), and every term here is exact.
double gamma_bound(Index terms) {
  const double nu = static_cast<double>(terms) * 0x1p-24;
  return nu / (1.0 - nu);
}

const Op kOps[] = {Op::kNone, Op::kTranspose};
const Accumulate kModes[] = {Accumulate::kOverwrite, Accumulate::kAdd};

class PrecisionScope : public ::testing::Test {
 protected:
  void TearDown() override {
    use_precision(Precision::kFloat32);
    use_gemm_backend(GemmBackend::kEigen, 1);
  }
};

using Bf16Reference = PrecisionScope;

// The reference is exact products accumulated in float32 by compute.gemm's library: within
// gamma_(k+1) sum |terms| of the exact value, under every library built in. The shapes are
// the gpt workload's in small (a k past any library's blocking) and an odd one.
TEST_F(Bf16Reference, WithinFloat32AccumulationOfTheExactProduct) {
  for (GemmBackend backend : available_gemm_backends()) {
    use_gemm_backend(backend, 1);
    use_precision(Precision::kBf16Reference);
    for (Op op_a : kOps)
      for (Op op_b : kOps)
        for (Accumulate mode : kModes)
          for (const auto& [m, n, k] : {std::tuple<Index, Index, Index>{37, 29, 300}, {64, 48, 1030}}) {
            const Bf16Operands o = bf16_operands(m, n, k, op_a, op_b, 5);
            const std::vector<float> c = product(o, mode);
            const Exact e = exact_product(o, mode);
            for (size_t i = 0; i < c.size(); ++i)
              ASSERT_LE(std::fabs(c[i] - e.value[i]), gamma_bound(k + 1) * e.magnitude[i])
                  << gemm_backend_name(backend) << " " << m << "x" << n << "x" << k << " element " << i;
          }
  }
}

// Rounding the operands is what bf16_reference does, no more: with operands already bf16 it
// gives float32's bits, under the same library.
TEST_F(Bf16Reference, OnBf16OperandsIsTheFloat32Product) {
  Bf16Operands o = bf16_operands(40, 33, 200, Op::kNone, Op::kTranspose, 9);
  for (float& v : o.a) v = from_bf16(to_bf16(v));
  for (float& v : o.b) v = from_bf16(to_bf16(v));
  const std::vector<float> float32 = product(o, Accumulate::kAdd);
  use_precision(Precision::kBf16Reference);
  EXPECT_EQ(product(o, Accumulate::kAdd), float32);
}

class Bf16Fast : public PrecisionScope {
 protected:
  void SetUp() override {
    const std::string lacking = bf16_products_lack();
    if (!lacking.empty()) GTEST_SKIP() << "the fast bf16 product is compiled, not run: this process lacks " << lacking;
  }
};

// Both paths sum the same exact products in float32, in different orders: each within
// gamma_(k+1) sum |terms| of the exact value, so within twice that of each other.
TEST_F(Bf16Fast, AgreesWithTheReference) {
  for (Op op_a : kOps)
    for (Op op_b : kOps)
      for (Accumulate mode : kModes)
        for (const auto& [m, n, k] : {std::tuple<Index, Index, Index>{37, 29, 300}, {128, 96, 512}, {5, 1, 2000}}) {
          const Bf16Operands o = bf16_operands(m, n, k, op_a, op_b, 11);
          use_precision(Precision::kBf16Reference);
          const std::vector<float> reference = product(o, mode);
          use_precision(Precision::kBf16);
          const std::vector<float> fast = product(o, mode);
          const Exact e = exact_product(o, mode);
          for (size_t i = 0; i < fast.size(); ++i) {
            ASSERT_LE(std::fabs(fast[i] - reference[i]), 2 * gamma_bound(k + 1) * e.magnitude[i])
                << m << "x" << n << "x" << k << " element " << i;
            ASSERT_LE(std::fabs(fast[i] - e.value[i]), gamma_bound(k + 1) * e.magnitude[i]);
          }
          // And it is a bf16 product, not float32's: on unrounded operands float32 is far off.
          use_precision(Precision::kFloat32);
          const std::vector<float> float32 = product(o, mode);
          double largest = 0.0;
          for (size_t i = 0; i < fast.size(); ++i) largest = std::max(largest, std::fabs(double{fast[i]} - float32[i]));
          EXPECT_GT(largest, 1e-3) << m << "x" << n << "x" << k;
        }
}

// The same primitive serves the same shape again (Note [bf16 matmul primitives]): a second
// call, with other values, gives that call's product, not the first's.
TEST_F(Bf16Fast, ReusedPrimitiveTakesNewOperands) {
  use_precision(Precision::kBf16);
  const Bf16Operands first = bf16_operands(16, 8, 32, Op::kNone, Op::kNone, 1);
  const Bf16Operands second = bf16_operands(16, 8, 32, Op::kNone, Op::kNone, 2);
  const std::vector<float> c1 = product(first, Accumulate::kOverwrite);
  const std::vector<float> c2 = product(second, Accumulate::kOverwrite);
  const Exact e2 = exact_product(second, Accumulate::kOverwrite);
  EXPECT_NE(c1, c2);
  for (size_t i = 0; i < c2.size(); ++i) ASSERT_LE(std::fabs(c2[i] - e2.value[i]), gamma_bound(33) * e2.magnitude[i]);
}

TEST_F(Bf16Fast, EmptyDepthIsZeroOrUnchanged) {
  use_precision(Precision::kBf16);
  std::vector<float> c(6, 3.0f);
  std::vector<float> none;
  multiply(MatrixView<float>(c.data(), 2, 3), ConstMatrixView<float>(none.data(), 2, 0), Op::kNone,
           ConstMatrixView<float>(none.data(), 0, 3), Op::kNone, Accumulate::kAdd);
  EXPECT_EQ(c, std::vector<float>(6, 3.0f));
  multiply(MatrixView<float>(c.data(), 2, 3), ConstMatrixView<float>(none.data(), 2, 0), Op::kNone,
           ConstMatrixView<float>(none.data(), 0, 3), Op::kNone, Accumulate::kOverwrite);
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
}

using OperandCopies = PrecisionScope;

// Note [operands converted once]: under "bf16" an OperandCopy holds the bf16 bits of its matrix
// (the conversion is portable code: any CPU), and reuse() gives them back for the same matrix
// without converting again; in every other precision, and for double, it copies nothing.
TEST_F(OperandCopies, HoldTheBitsOfTheirMatrixUnderBf16Only) {
  std::vector<float> values = {1.0f, 1.00390625f, -3.0078125f, 1e-30f, 65504.0f, -0.0f};
  const ConstMatrixView<float> matrix(values.data(), 2, 3);
  OperandCopy<float> copy;
  for (Precision other : {Precision::kFloat32, Precision::kBf16Reference}) {
    use_precision(other);
    const Operand<float> operand = copy.make(matrix);
    EXPECT_EQ(operand.bf16, nullptr) << precision_name(other);
    EXPECT_EQ(operand.values.data(), values.data());
  }
  use_precision(Precision::kBf16);
  const Operand<float> operand = copy.make(matrix);
  ASSERT_NE(operand.bf16, nullptr);
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(operand.bf16[i], to_bf16(values[i])) << i;
  // 1.00390625 = 1 + 2^-8 is a tie between bf16's 1 and 1 + 2^-7: to even, 1 (0x3f80).
  EXPECT_EQ(operand.bf16[1], 0x3f80u);

  // reuse() of the same matrix converts nothing: the caller vouches that it is unchanged, so a
  // change it was not told of is not seen (the bits are still the first value's).
  values[0] = 2.0f;
  EXPECT_EQ(copy.reuse(matrix).bf16, operand.bf16);
  EXPECT_EQ(copy.reuse(matrix).bf16[0], to_bf16(1.0f));
  // Another shape of the same memory, or another matrix, is converted anew.
  EXPECT_EQ(copy.reuse(ConstMatrixView<float>(values.data(), 3, 2)).bf16[0], to_bf16(2.0f));
  std::vector<float> other_values(values.size(), 0.5f);
  EXPECT_EQ(copy.reuse(ConstMatrixView<float>(other_values.data(), 2, 3)).bf16[0], to_bf16(0.5f));
  // A precision changed since make(): float32 reads the matrix itself.
  use_precision(Precision::kFloat32);
  EXPECT_EQ(copy.reuse(ConstMatrixView<float>(values.data(), 3, 2)).bf16, nullptr);

  use_precision(Precision::kBf16);
  std::vector<double> doubles(6, 1.0);
  OperandCopy<double> double_copy;
  EXPECT_EQ(double_copy.make(ConstMatrixView<double>(doubles.data(), 2, 3)).bf16, nullptr);
}

// The products read a copy's bits as they would have converted the matrix: the same bits, for
// every op and mode, and column by column in multiply_in_pieces (b's bits cut with its columns).
TEST_F(Bf16Fast, ProductsOfCopiedOperandsAreTheProductsOfTheirMatrices) {
  use_precision(Precision::kBf16);
  for (Op op_a : kOps)
    for (Op op_b : kOps)
      for (Accumulate mode : kModes) {
        const Bf16Operands o = bf16_operands(37, 29, 300, op_a, op_b, 13);
        const std::vector<float> converted_at_the_product = product(o, mode);
        const Index a_rows = op_a == Op::kNone ? o.m : o.k, b_rows = op_b == Op::kNone ? o.k : o.n;
        const ConstMatrixView<float> a(o.a.data(), a_rows, o.m * o.k / a_rows), b(o.b.data(), b_rows, o.k * o.n / b_rows);
        OperandCopy<float> a_copy, b_copy;
        std::vector<float> c = o.c;
        multiply(MatrixView<float>(c.data(), o.m, o.n), a_copy.make(a), op_a, b_copy.make(b), op_b, mode);
        EXPECT_EQ(c, converted_at_the_product) << (op_a == Op::kNone ? "N" : "T") << (op_b == Op::kNone ? "N" : "T");
        if (op_b != Op::kNone) continue;
        std::vector<float> from_matrices = o.c, from_copies = o.c;
        multiply_in_pieces(MatrixView<float>(from_matrices.data(), o.m, o.n), a, op_a, b, mode, 7);
        multiply_in_pieces(MatrixView<float>(from_copies.data(), o.m, o.n), a_copy.reuse(a), op_a, b_copy.reuse(b), mode,
                           7);
        EXPECT_EQ(from_copies, from_matrices);
      }
}

using Bf16Tile = PrecisionScope;

// Attention's tiles (multiply_tile) in bf16_reference round their strided operands and multiply
// by Eigen: the bits of the float32 tile product of the rounded operands, and nothing outside the
// views touched.
TEST_F(Bf16Tile, TheReferenceIsTheFloat32TileOfRoundedOperands) {
  const Index d = 8, t = 13, stride = 24;  // (d, t) heads inside (24, t) buffers
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(stride * t)), k(q.size());
  for (float& v : q) v = unit(rng);
  for (float& v : k) v = unit(rng);
  std::vector<float> q16 = q, k16 = k;
  for (float& v : q16) v = from_bf16(to_bf16(v));
  for (float& v : k16) v = from_bf16(to_bf16(v));
  const auto scores = [&](const std::vector<float>& qs, const std::vector<float>& ks) {
    std::vector<float> s(static_cast<size_t>(t * t + 1), -5.0f);
    multiply_tile(StridedView<float>(s.data(), t, t, Eigen::OuterStride<>(t)),
                  ConstStridedView<float>(ks.data() + 3, d, t, Eigen::OuterStride<>(stride)), Op::kTranspose,
                  ConstStridedView<float>(qs.data() + 3, d, t, Eigen::OuterStride<>(stride)), Op::kNone,
                  Accumulate::kOverwrite);
    return s;
  };
  const std::vector<float> expected = scores(q16, k16);
  EXPECT_EQ(expected.back(), -5.0f);
  use_precision(Precision::kBf16Reference);
  EXPECT_EQ(scores(q, k), expected);
  use_precision(Precision::kFloat32);
  EXPECT_NE(scores(q, k), expected);
}

// A dense column-major (rows, cols) matrix placed 2 values into a buffer whose columns are
// rows + 3 apart, the rest of the buffer `guard`: a strided view as attention's heads are.
struct Embedded {
  std::vector<float> buffer;
  Index rows, cols, stride;
  float* data() { return buffer.data() + 2; }
};
Embedded embedded(const std::vector<float>& dense, Index rows, Index cols, float guard) {
  Embedded e{std::vector<float>(static_cast<size_t>((rows + 3) * cols + 4), guard), rows, cols, rows + 3};
  for (Index j = 0; j < cols; ++j)
    for (Index i = 0; i < rows; ++i) e.data()[i + j * e.stride] = dense[static_cast<size_t>(i + j * rows)];
  return e;
}

// Under bf16, where the CPU has AVX512_BF16, the tile is our vdpbf16ps kernel's (Note [bf16
// tiles]): the same exact products as the reference's, summed in float32 in another order, so
// within gamma_(k+1) sum |terms| of the exact value and twice that of the reference, for every
// transpose, both modes, rows past a vector (and a part of one), odd depths, depths past one run
// of 32, columns past a block of 4; and nothing outside c's view written. Listed as skipped on a
// CPU without it, where bf16 is refused (the tile itself then falls back to the reference's).
TEST_F(Bf16Tile, TheFastTileIsWithinFloat32AccumulationOfTheExactProduct) {
  if (!cpu_runs(Isa::kAvx512Bf16)) GTEST_SKIP() << "the bf16 tile kernel is compiled, not run: this CPU lacks " << cpu_lacks(Isa::kAvx512Bf16);
  Index differing = 0;  // elements where the kernel's sum order gave other bits than the reference's
  for (Op op_a : kOps)
    for (Op op_b : kOps)
      for (Accumulate mode : kModes)
        // Depths leaving runs of 32, 8, 1, 24, 15 and 17; columns of every width 1-4 in the last block.
        for (const auto& shape : {std::tuple<Index, Index, Index>{64, 64, 32}, {32, 64, 64}, {13, 13, 8}, {37, 29, 65},
                                  {70, 5, 1}, {1, 7, 33}, {16, 4, 0}, {20, 6, 24}, {17, 30, 47}, {33, 2, 17}}) {
          // Plain variables, not a structured binding: clang 14's lambdas cannot capture those.
          const Index m = std::get<0>(shape), n = std::get<1>(shape), k = std::get<2>(shape);
          const Bf16Operands o = bf16_operands(m, n, k, op_a, op_b, 17);
          // Stored as op names them: op(a) (m, k) is a (m, k) or a (k, m) transposed.
          Embedded a = op_a == Op::kNone ? embedded(o.a, m, k, 1e30f) : embedded(o.a, k, m, 1e30f);
          Embedded b = op_b == Op::kNone ? embedded(o.b, k, n, 1e30f) : embedded(o.b, n, k, 1e30f);
          const auto tile = [&](Precision precision) {
            use_precision(precision);
            Embedded c = embedded(o.c, m, n, -7.0f);
            multiply_tile(StridedView<float>(c.data(), m, n, Eigen::OuterStride<>(c.stride)),
                          ConstStridedView<float>(a.data(), a.rows, a.cols, Eigen::OuterStride<>(a.stride)), op_a,
                          ConstStridedView<float>(b.data(), b.rows, b.cols, Eigen::OuterStride<>(b.stride)), op_b, mode);
            return c;
          };
          Embedded reference = tile(Precision::kBf16Reference), fast = tile(Precision::kBf16);
          const Exact e = exact_product(o, mode);
          for (size_t at = 0; at < fast.buffer.size(); ++at) {
            const Index offset = static_cast<Index>(at) - 2, i = offset % fast.stride, j = offset / fast.stride;
            if (offset < 0 || i >= m || j >= n) {
              ASSERT_EQ(fast.buffer[at], -7.0f) << "written outside the view at " << at;
              continue;
            }
            const size_t element = static_cast<size_t>(i + j * m);
            const double bound = gamma_bound(k + 1) * e.magnitude[element];
            ASSERT_LE(std::fabs(fast.buffer[at] - e.value[element]), bound)
                << m << "x" << n << "x" << k << " ops " << int(op_a) << int(op_b) << " element " << i << "," << j;
            ASSERT_LE(std::fabs(fast.buffer[at] - reference.buffer[at]), 2 * bound);
            differing += fast.buffer[at] != reference.buffer[at];
          }
          // The operands were rounded: the float32 tile of unrounded operands is far off.
          if (k >= 8) {
            Embedded float32 = tile(Precision::kFloat32);
            double largest = 0.0;
            for (size_t at = 0; at < fast.buffer.size(); ++at)
              largest = std::max(largest, std::fabs(double{fast.buffer[at]} - float32.buffer[at]));
            EXPECT_GT(largest, 1e-3) << m << "x" << n << "x" << k;
          }
        }
  // The kernel ran, rather than the reference in its place: its own order shows somewhere.
  EXPECT_GT(differing, 0);
}

// The kernel's own rounding, by hand: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and goes to the
// even 1; 1 + 3 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6 and goes to the even 1 + 2^-6. Their
// sum with weights 1 is 2 + 2^-6 (truncation would give 2 + 2^-7, rounding halves up 2 + 3 2^-7),
// through either operand, stored either way.
TEST_F(Bf16Tile, TheFastTileRoundsTiesToEven) {
  if (!cpu_runs(Isa::kAvx512Bf16)) GTEST_SKIP() << "the bf16 tile kernel is compiled, not run: this CPU lacks " << cpu_lacks(Isa::kAvx512Bf16);
  use_precision(Precision::kBf16);
  const std::vector<float> ties = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f}, ones = {1.0f, 1.0f};
  for (Op op_a : kOps)
    for (Op op_b : kOps)
      for (const bool ties_in_a : {true, false}) {
        // c (1, 1) = op(a) (1, 2) op(b) (2, 1); a (1, 2) or a (2, 1) transposed; b (2, 1) or (1, 2).
        const std::vector<float>& a = ties_in_a ? ties : ones;
        const std::vector<float>& b = ties_in_a ? ones : ties;
        float c = 5.0f;
        multiply_tile(StridedView<float>(&c, 1, 1, Eigen::OuterStride<>(1)),
                      op_a == Op::kNone ? ConstStridedView<float>(a.data(), 1, 2, Eigen::OuterStride<>(1))
                                        : ConstStridedView<float>(a.data(), 2, 1, Eigen::OuterStride<>(2)),
                      op_a,
                      op_b == Op::kNone ? ConstStridedView<float>(b.data(), 2, 1, Eigen::OuterStride<>(2))
                                        : ConstStridedView<float>(b.data(), 1, 2, Eigen::OuterStride<>(1)),
                      op_b, Accumulate::kOverwrite);
        EXPECT_EQ(c, 2.0f + 0x1p-6f) << "ops " << int(op_a) << int(op_b) << (ties_in_a ? " ties in a" : " ties in b");
      }
}

// bf16's rounding of special values in the tile kernel's own rounding: Inf stays Inf, a NaN
// (even one whose payload is only in the low 16 bits, which truncation would make Inf) stays NaN.
TEST_F(Bf16Tile, TheFastTileKeepsInfinitiesAndNans) {
  if (!cpu_runs(Isa::kAvx512Bf16)) GTEST_SKIP() << "the bf16 tile kernel is compiled, not run: this CPU lacks " << cpu_lacks(Isa::kAvx512Bf16);
  use_precision(Precision::kBf16);
  const float low_payload_nan = std::bit_cast<float>(0x7f800001u);
  std::vector<float> a = {1.0f, 2.0f, 1.0f, 1.0f}, b = {std::numeric_limits<float>::infinity(), 0.5f, low_payload_nan, 0.25f};
  std::vector<float> c(4, 0.0f);  // (2, 2) = a (2, 2) b (2, 2)
  multiply_tile(StridedView<float>(c.data(), 2, 2, Eigen::OuterStride<>(2)),
                ConstStridedView<float>(a.data(), 2, 2, Eigen::OuterStride<>(2)), Op::kNone,
                ConstStridedView<float>(b.data(), 2, 2, Eigen::OuterStride<>(2)), Op::kNone, Accumulate::kOverwrite);
  EXPECT_EQ(c[0], std::numeric_limits<float>::infinity());  // 1 inf + 1 0.5
  EXPECT_EQ(c[1], std::numeric_limits<float>::infinity());  // 2 inf + 1 0.5
  EXPECT_TRUE(std::isnan(c[2]));
  EXPECT_TRUE(std::isnan(c[3]));
}

TEST(PrecisionNames, RoundTrip) {
  for (const std::string& name : precision_names()) {
    Precision p = Precision::kFloat32;
    ASSERT_TRUE(find_precision(name, &p)) << name;
    EXPECT_EQ(precision_name(p), name);
  }
  Precision p = Precision::kBf16;
  EXPECT_FALSE(find_precision("fp16", &p));
  EXPECT_EQ(p, Precision::kBf16);
}

}  // namespace
}  // namespace mpiddp::kernels
