#include "mpiddp/kernels/gemm_columns.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include "mpiddp/core/rng.hpp"

namespace mpiddp::kernels {

std::vector<Index> chunked_product_pieces(Index chunk) {
  constexpr Index kMostColumns = 128;
  std::vector<Index> pieces;
  for (Index piece = chunk; piece <= kMostColumns || pieces.empty(); piece *= 2) pieces.insert(pieces.begin(), piece);
  return pieces;
}

std::vector<Index> chunked_product_widths(Index chunks, Index chunk, Index piece) {
  std::set<Index> widths;
  for (Index world = 1; world <= chunks; ++world) {
    if (chunks % world != 0) continue;
    const Index columns = chunks / world * chunk;  // a rank's
    if (columns >= piece) widths.insert(piece);
    if (columns % piece != 0) widths.insert(columns % piece);
  }
  return {widths.begin(), widths.end()};
}

std::vector<GemmShape> column_products(const std::vector<GemmCall>& calls, GemmRole role) {
  std::vector<GemmShape> products;
  for (const GemmCall& call : calls)
    if (call.role == role && call.shape.op_b == Op::kNone &&
        std::find(products.begin(), products.end(), call.shape) == products.end())
      products.push_back(call.shape);
  return products;
}

namespace {

template <typename T>
std::vector<T> random_values(Rng& rng, Index count) {
  // Of either sign, so that the order of the additions shows in the last bits.
  std::vector<T> values(static_cast<size_t>(count));
  for (T& v : values) v = static_cast<T>(rng.uniform(-1.0, 1.0));
  return values;
}

bool columns_equal(const void* x, const void* y, size_t bytes) { return std::memcmp(x, y, bytes) == 0; }

}  // namespace

template <typename T>
bool column_bits_hold(const std::vector<GemmShape>& products, Index chunk, const std::vector<Index>& widths) {
  if (widths.empty()) return true;
  const Index columns = *std::max_element(widths.begin(), widths.end());
  Rng rng(20261202);
  for (const GemmShape& shape : products) {
    const Index m = shape.m, k = shape.k;
    const Index a_rows = shape.op_a == Op::kTranspose ? k : m;
    const std::vector<T> a = random_values<T>(rng, m * k), b = random_values<T>(rng, k * columns);
    const std::vector<T> start = random_values<T>(rng, m * columns);  // c before a product that adds
    ConstMatrixView<T> av(a.data(), a_rows, m * k / a_rows);
    // Both modes: the forward product adds to the bias, the input gradient overwrites, and a
    // library may keep other kernels for each.
    for (Accumulate mode : {Accumulate::kOverwrite, Accumulate::kAdd}) {
      // The reference: each chunk's columns in a product of their own.
      std::vector<T> reference = start, c(start.size());
      for (Index first = 0; first + chunk <= columns; first += chunk)
        multiply(MatrixView<T>(reference.data() + first * m, m, chunk), av, shape.op_a,
                 ConstMatrixView<T>(b.data() + first * k, k, chunk), Op::kNone, mode);
      for (Index width : widths) {
        const Index used = columns / width * width;
        c = start;
        multiply_in_pieces(MatrixView<T>(c.data(), m, used), av, shape.op_a,
                           ConstMatrixView<T>(b.data(), k, used), mode, width);
        if (!columns_equal(c.data(), reference.data(), static_cast<size_t>(m * used) * sizeof(T))) return false;
      }
    }
  }
  return true;
}

template <typename T>
bool address_bits_hold(const std::vector<GemmShape>& products) {
  constexpr Index kShifts = 4;  // the operands 0, 1, 2 and 3 values further on
  Rng rng(20261203);
  for (const GemmShape& shape : products) {
    const Index a_size = shape.m * shape.k, b_size = shape.k * shape.n;
    const Index a_rows = shape.op_a == Op::kTranspose ? shape.k : shape.m;
    const Index b_rows = shape.op_b == Op::kTranspose ? shape.n : shape.k;
    const std::vector<T> a = random_values<T>(rng, a_size), b = random_values<T>(rng, b_size);
    std::vector<T> a_at(static_cast<size_t>(a_size + kShifts)), b_at(static_cast<size_t>(b_size + kShifts));
    std::vector<T> first(static_cast<size_t>(shape.m * shape.n)), c(first.size());
    for (Index shift = 0; shift < kShifts; ++shift) {
      std::copy(a.begin(), a.end(), a_at.begin() + shift);
      std::copy(b.begin(), b.end(), b_at.begin() + shift);
      multiply(MatrixView<T>(shift == 0 ? first.data() : c.data(), shape.m, shape.n),
               ConstMatrixView<T>(a_at.data() + shift, a_rows, a_size / a_rows), shape.op_a,
               ConstMatrixView<T>(b_at.data() + shift, b_rows, b_size / b_rows), shape.op_b, Accumulate::kOverwrite);
      if (shift > 0 && !columns_equal(c.data(), first.data(), c.size() * sizeof(T))) return false;
    }
  }
  return true;
}

template bool address_bits_hold<float>(const std::vector<GemmShape>&);
template bool address_bits_hold<double>(const std::vector<GemmShape>&);
template bool column_bits_hold<float>(const std::vector<GemmShape>&, Index, const std::vector<Index>&);
template bool column_bits_hold<double>(const std::vector<GemmShape>&, Index, const std::vector<Index>&);

}  // namespace mpiddp::kernels
